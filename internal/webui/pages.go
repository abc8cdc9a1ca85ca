package webui

import (
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// pageData is what every template gets; one of the page's parts is set.
type pageData struct {
	Title    string
	Error    string
	Notice   string
	CSRF     string
	LoggedIn bool
	Inbox    *inboxData
	Thread   *threadData
	Message  *messageData
	Outbound *outboundData
}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"when": func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
		"safe": mailview.SafeText,
		"size": func(n int64) string { return strconv.FormatInt(n, 10) + " bytes" },
	}
	out := map[string]*template.Template{}
	for _, name := range []string{"login", "inbox", "thread", "message", "outbound", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// page writes the page name with data.
func (s *Server) page(w http.ResponseWriter, r *http.Request, code int, name string, data pageData) {
	if sess := s.auth.session(r); sess != nil && name != "login" {
		data.CSRF, data.LoggedIn = sess.csrf, true
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := s.pages[name].Execute(w, data); err != nil {
		s.log.Warn("web viewer: rendering a page failed", "page", name, "err", err)
	}
}

// fail shows err on the error page, as not found when it is one.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, mailbox.ErrNotFound) {
		code = http.StatusNotFound
	}
	s.page(w, r, code, "error", pageData{Title: "Error", Error: mailview.SafeText(err.Error())})
}

// inboxData is the inbox page.
type inboxData struct {
	Provider, Status, Agent, Correlation, Query string
	Rows                                        []*mailbox.Entry
	Next                                        template.URL // the next page; "" on the last
	Providers                                   []schema.Provider
	Statuses                                    []mailbox.Status
	Backlog                                     int // messages not yet in the search index
}

var inboxStatuses = []mailbox.Status{mailbox.StatusNew, mailbox.StatusClaimed, mailbox.StatusFailed, mailbox.StatusDone, mailbox.StatusDead}

// parseKey reads a page position "<ts>.<id>".
func parseKey(s string) (*mailbox.Key, error) {
	ts, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, fmt.Errorf("after %q is not a page position", s)
	}
	return &mailbox.Key{TS: n, ID: id}, nil
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request, _ *session) {
	q := r.URL.Query()
	d := &inboxData{Provider: q.Get("provider"), Status: q.Get("status"), Agent: q.Get("agent"), Correlation: q.Get("correlation"),
		Query: q.Get("q"), Providers: schema.Implemented, Statuses: inboxStatuses}
	b := mailbox.Browse{Filter: mailbox.Filter{All: true, Correlation: d.Correlation}, Agent: d.Agent, Search: d.Query, Limit: s.opts.PageSize}
	var provs, stats []string
	if d.Provider != "" {
		provs = []string{d.Provider}
	}
	if d.Status != "" {
		stats = []string{d.Status}
	}
	err := mailview.AddFilters(&b.Filter, provs, stats)
	if a := q.Get("after"); err == nil && a != "" {
		b.After, err = parseKey(a)
	}
	if err != nil {
		s.page(w, r, http.StatusBadRequest, "error", pageData{Title: "Inbox", Error: strings.ReplaceAll(err.Error(), "--", "")})
		return
	}
	next, err := s.opts.Mailbox.Newest(r.Context(), b, func(e *mailbox.Entry) error { d.Rows = append(d.Rows, e); return nil })
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if next != nil {
		q.Set("after", strconv.FormatInt(next.TS, 10)+"."+next.ID)
		d.Next = template.URL("/ui/?" + q.Encode())
	}
	if d.Query != "" && !s.hub.caughtUp.Load() {
		// Counting is a scan of the index: only while it is being built.
		d.Backlog, _ = s.opts.Mailbox.SearchBacklog(r.Context())
	}
	s.page(w, r, http.StatusOK, "inbox", pageData{Title: "Inbox", Inbox: d})
}

// threadData is the thread page: its entries oldest first, each draft
// with its delivery.
type threadData struct {
	ID      string
	Entries []threadEntry
}

type threadEntry struct {
	*mailbox.Entry
	Delivery string // a draft's delivery status, in words
}

func (s *Server) thread(w http.ResponseWriter, r *http.Request, _ *session) {
	id := r.PathValue("id")
	queue, err := s.queueByID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := &threadData{ID: id}
	err = mailview.Thread(r.Context(), s.opts.Mailbox, id, func(e *mailbox.Entry) error {
		te := threadEntry{Entry: e}
		if e.Direction == schema.Outbound {
			te.Delivery = s.deliveryOf(r, e, queue)
		}
		d.Entries = append(d.Entries, te)
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.page(w, r, http.StatusOK, "thread", pageData{Title: "Thread", Thread: d})
}

func (s *Server) queueByID(r *http.Request) (map[string]mailbox.OutboundDraft, error) {
	ds, err := s.opts.Mailbox.OutboundDrafts(r.Context())
	m := make(map[string]mailbox.OutboundDraft, len(ds))
	for _, d := range ds {
		m[d.ID] = d
	}
	return m, err
}

// deliveryOf says where a draft is: queued (waiting, awaiting approval),
// sent with the provider's id, or dead with the reason.
func (s *Server) deliveryOf(r *http.Request, e *mailbox.Entry, queue map[string]mailbox.OutboundDraft) string {
	if q, ok := queue[e.ID]; ok {
		out := strings.ReplaceAll(q.Status, "_", " ")
		if q.Reason != "" {
			out += ": " + q.Reason
		}
		return out
	}
	d, _, err := s.opts.Mailbox.Draft(r.Context(), e.ID)
	if err != nil || d.Delivery == nil {
		return string(e.Status)
	}
	if e.Status == mailbox.StatusSent {
		return "sent as " + d.Delivery.ProviderMessageID
	}
	return string(e.Status) + ": " + string(d.Delivery.Reason)
}

// messageData is the message page.
type messageData struct {
	Entry       *mailbox.Entry
	Subject     string
	To          string
	Body        template.HTML
	FrontMatter string
	Files       []fileLink
}

type fileLink struct {
	N          int
	Name, Type string
	Size       int64
}

func (s *Server) message(w http.ResponseWriter, r *http.Request, _ *session) {
	d, err := s.messageOf(r, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.page(w, r, http.StatusOK, "message", pageData{Title: d.Subject, Message: d})
}

// maxFrontMatter bounds what is read of a file for its front matter.
const maxFrontMatter = 64 << 10

func (s *Server) messageOf(r *http.Request, id string) (*messageData, error) {
	mb := s.opts.Mailbox
	e, err := mb.Get(r.Context(), id)
	if err != nil {
		return nil, err
	}
	d := &messageData{Entry: e, Subject: e.Session.Name}
	var body string
	var arts []schema.Artifact
	if e.Direction == schema.Inbound {
		m, _, err := mb.Message(r.Context(), id)
		if err != nil {
			return nil, err
		}
		body, arts = m.Body, m.Artifacts
		if body == "" {
			body = string(m.Content.Markdown)
		}
	} else {
		dr, _, err := mb.Draft(r.Context(), id)
		if err != nil {
			return nil, err
		}
		body, d.Subject = dr.Body, dr.Subject
		if body == "" {
			body = dr.Text()
		}
		for _, a := range dr.Artifacts {
			arts = append(arts, schema.Artifact{ID: a.ID, Name: a.Name, MimeType: a.MimeType, Size: a.Size})
		}
	}
	for i, a := range arts {
		d.Files = append(d.Files, fileLink{N: i, Name: a.Name, Type: a.MimeType, Size: a.Size})
	}
	d.Body = renderBody(mailview.SafeText(body))
	if f, _, err := mb.OpenFile(r.Context(), id); err == nil {
		raw, _ := io.ReadAll(io.LimitReader(f, maxFrontMatter))
		f.Close()
		d.FrontMatter = frontMatter(raw)
	}
	return d, nil
}

// frontMatter is the YAML between the file's --- lines.
func frontMatter(raw []byte) string {
	s := strings.TrimPrefix(string(raw), "---\n")
	if i := strings.Index(s, "\n---"); i >= 0 {
		s = s[:i+1]
	}
	return mailview.SafeText(s)
}

// attachment serves the n-th artifact of a message as a download, never
// shown in the page's origin (an HTML attachment would run there).
func (s *Server) attachment(w http.ResponseWriter, r *http.Request, _ *session) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil {
		http.Error(w, "bad attachment number", http.StatusBadRequest)
		return
	}
	id, name, err := s.artifactOf(r, r.PathValue("id"), n)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := s.opts.Dropzone.Open(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "", time.Time{}, f)
}

func (s *Server) artifactOf(r *http.Request, msg string, n int) (id, name string, err error) {
	mb := s.opts.Mailbox
	e, err := mb.Get(r.Context(), msg)
	if err != nil {
		return "", "", err
	}
	if e.Direction == schema.Inbound {
		m, _, err := mb.Message(r.Context(), msg)
		if err != nil {
			return "", "", err
		}
		if n >= 0 && n < len(m.Artifacts) {
			return m.Artifacts[n].ID, m.Artifacts[n].Name, nil
		}
	} else {
		d, _, err := mb.Draft(r.Context(), msg)
		if err != nil {
			return "", "", err
		}
		if n >= 0 && n < len(d.Artifacts) {
			return d.Artifacts[n].ID, d.Artifacts[n].Name, nil
		}
	}
	return "", "", &mailbox.NotFoundError{ID: msg + " attachment " + strconv.Itoa(n)}
}

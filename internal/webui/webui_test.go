package webui

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

var owner = agentapi.Caller{UID: 1000, User: "me", Owner: true}

type fixture struct {
	s     *Server
	mb    *mailbox.Mailbox
	srv   *httptest.Server
	clock *testutil.Clock
}

func newFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	root := t.TempDir()
	if err := mailbox.Init(root); err != nil {
		t.Fatal(err)
	}
	mb, err := mailbox.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	clock := &testutil.Clock{T: time.Now()}
	o.Mailbox, o.Now = mb, clock.Now
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Mount(http.NotFoundHandler()))
	t.Cleanup(srv.Close)
	return &fixture{s: s, mb: mb, srv: srv, clock: clock}
}

func (f *fixture) deliver(t *testing.T, msgs ...*schema.Message) {
	t.Helper()
	in := make([]mailbox.Inbound, len(msgs))
	for i, m := range msgs {
		in[i] = mailbox.Inbound{Message: m}
	}
	if _, err := f.mb.WriteInbound(context.Background(), in, nil); err != nil {
		t.Fatal(err)
	}
}

// client is a browser without redirects followed, with a cookie jar.
func (f *fixture) client(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *fixture) token(t *testing.T) string {
	t.Helper()
	l, err := f.s.IssueLogin(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	return l.Path
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login logs c in and returns the session's CSRF token.
func (f *fixture) login(t *testing.T, c *http.Client) string {
	t.Helper()
	resp, _ := get(t, c, f.srv.URL+f.token(t))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", resp.Status)
	}
	u, _ := url.Parse(f.srv.URL + "/ui/")
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == cookieName {
			f.s.auth.mu.Lock()
			defer f.s.auth.mu.Unlock()
			return f.s.auth.sessions[hashOf(ck.Value)].csrf
		}
	}
	t.Fatal("no session cookie")
	return ""
}

func TestLoginCookieAndSingleUse(t *testing.T) {
	f := newFixture(t, Options{})
	c := f.client(t)
	path := f.token(t)
	resp, _ := get(t, c, f.srv.URL+path)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login answered %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{cookieName + "=", "Path=/ui/", "HttpOnly", "SameSite=Strict", "Max-Age=", "Expires="} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	// The same token again, from another browser: refused.
	resp, body := get(t, f.client(t), f.srv.URL+path)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != "" || !strings.Contains(body, "used or expired") {
		t.Fatalf("a token used twice: %s %q", resp.Status, resp.Header.Get("Set-Cookie"))
	}
}

func TestLoginTokenExpires(t *testing.T) {
	f := newFixture(t, Options{TokenTTL: time.Minute})
	path := f.token(t)
	f.clock.Advance(61 * time.Second)
	resp, _ := get(t, f.client(t), f.srv.URL+path)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("an expired token: %s, cookie %q", resp.Status, resp.Header.Get("Set-Cookie"))
	}
}

func TestSessionExpiresAndIsBounded(t *testing.T) {
	f := newFixture(t, Options{SessionTTL: time.Hour, MaxSessions: 2})
	f.deliver(t, testutil.Message(schema.Slack, "m1", time.Now(), "secret words"))
	a, b, c := f.client(t), f.client(t), f.client(t)
	f.login(t, a)
	f.clock.Advance(time.Minute)
	f.login(t, b)
	f.clock.Advance(time.Minute)
	f.login(t, c) // a's, the oldest, goes
	if resp, _ := get(t, a, f.srv.URL+"/ui/"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the oldest of 3 sessions over a bound of 2: %s", resp.Status)
	}
	if resp, body := get(t, c, f.srv.URL+"/ui/"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "secret words") {
		t.Fatalf("the newest session: %s", resp.Status)
	}
	f.clock.Advance(time.Hour + time.Second)
	if resp, _ := get(t, c, f.srv.URL+"/ui/"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an expired session: %s", resp.Status)
	}
}

func TestOnlyTheOwnerGetsAToken(t *testing.T) {
	f := newFixture(t, Options{})
	_, err := f.s.IssueLogin(context.Background(), agentapi.Caller{UID: 1001, User: "agent"})
	var e *agentapi.Error
	if !errors.As(err, &e) || e.Code != 77 {
		t.Fatalf("an agent's login: %v", err)
	}
	// With an approval gate, its approvers get in too; other users not.
	g := newFixture(t, Options{Approver: &fakeApprover{}})
	if _, err := g.s.IssueLogin(context.Background(), agentapi.Caller{UID: 1002, User: "approver"}); err != nil {
		t.Errorf("an approver's login: %v", err)
	}
	if _, err := g.s.IssueLogin(context.Background(), agentapi.Caller{UID: 1001, User: "agent"}); !errors.As(err, &e) || e.Code != 77 {
		t.Errorf("an agent's login beside an approval gate: %v", err)
	}
}

// No page shows message data without a session.
func TestNoDataWithoutSession(t *testing.T) {
	f := newFixture(t, Options{})
	m := testutil.Message(schema.Email, "m1", time.Now(), "the secret body")
	m.Artifacts = nil
	f.deliver(t, m)
	c := f.client(t)
	for _, p := range []string{"/ui/", "/ui/?status=new", "/ui/thread/" + m.ID, "/ui/message/" + m.ID, "/ui/outbound", "/ui/events", "/ui/attachment/" + m.ID + "/0"} {
		resp, body := get(t, c, f.srv.URL+p)
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "secret") || strings.Contains(body, "Subject m1") || !strings.Contains(body, "courier web") {
			t.Errorf("GET %s without a session: %s\n%s", p, resp.Status, body)
		}
	}
	// A made-up cookie is no session.
	u, _ := url.Parse(f.srv.URL + "/ui/")
	c.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: "forged"}})
	if resp, body := get(t, c, f.srv.URL+"/ui/"); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "secret") {
		t.Errorf("a forged cookie: %s", resp.Status)
	}
}

// fakeOperator records the verbs the viewer runs.
type fakeOperator struct{ calls []string }

func (o *fakeOperator) Outbound(ctx context.Context, c agentapi.Caller, req agentapi.OutboundRequest) (*agentapi.OutboundResult, error) {
	o.calls = append(o.calls, req.Verb+" "+req.ID+" by "+c.User)
	return &agentapi.OutboundResult{ID: req.ID, Verb: req.Verb, Message: req.ID + " done"}, nil
}

type fakeApprover struct{ calls []string }

func (a *fakeApprover) Approve(ctx context.Context, c agentapi.Caller, id string) (*agentapi.OutboundResult, error) {
	a.calls = append(a.calls, "approve "+id+" by "+c.User)
	return &agentapi.OutboundResult{ID: id}, nil
}

func (a *fakeApprover) Reject(ctx context.Context, c agentapi.Caller, id, reason string) (*agentapi.OutboundResult, error) {
	a.calls = append(a.calls, "reject "+id+" by "+c.User+": "+reason)
	return &agentapi.OutboundResult{ID: id}, nil
}

func (a *fakeApprover) MayApprove(c agentapi.Caller) bool { return c.User == "approver" }

func post(t *testing.T, c *http.Client, u, origin string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestCSRF(t *testing.T) {
	op := &fakeOperator{}
	f := newFixture(t, Options{Operator: op})
	c := f.client(t)
	csrf := f.login(t, c)
	u := f.srv.URL + "/ui/outbound/cancel/email_x"
	for name, tc := range map[string]struct {
		origin string
		form   url.Values
	}{
		"no token":     {f.srv.URL, url.Values{}},
		"wrong token":  {f.srv.URL, url.Values{"csrf": {"nope"}}},
		"other origin": {"http://evil.example", url.Values{"csrf": {csrf}}},
		"no origin":    {"", url.Values{"csrf": {csrf}}},
	} {
		if resp, _ := post(t, c, u, tc.origin, tc.form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s", name, resp.Status)
		}
	}
	if len(op.calls) != 0 {
		t.Fatalf("refused POSTs ran %v", op.calls)
	}
	if resp, _ := post(t, c, u, f.srv.URL, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusOK || len(op.calls) != 1 || op.calls[0] != "cancel email_x by me" {
		t.Fatalf("a good POST: %s %v", resp.Status, op.calls)
	}
}

func TestApproveRejectOnlyForHeldDrafts(t *testing.T) {
	ap := &fakeApprover{}
	f := newFixture(t, Options{Approver: ap, Operator: &fakeOperator{}})
	if v := f.s.verbsFor(StatusAwaitingApproval); strings.Join(v, ",") != "approve,reject,cancel" {
		t.Errorf("a held draft's verbs: %v", v)
	}
	for _, st := range []string{mailbox.OutQueued, mailbox.OutWaiting, mailbox.OutDead, mailbox.OutSending} {
		for _, v := range f.s.verbsFor(st) {
			if v == "approve" || v == "reject" {
				t.Errorf("a %s draft offers %s", st, v)
			}
		}
	}
	c := f.client(t)
	csrf := f.login(t, c)
	post(t, c, f.srv.URL+"/ui/outbound/approve/email_a", f.srv.URL, url.Values{"csrf": {csrf}})
	post(t, c, f.srv.URL+"/ui/outbound/reject/email_b", f.srv.URL, url.Values{"csrf": {csrf}, "reason": {"wrong tone"}})
	if got := strings.Join(ap.calls, "; "); got != "approve email_a by me; reject email_b by me: wrong tone" {
		t.Fatalf("approver calls: %s", got)
	}
	// Without an Approver, no button and no route.
	g := newFixture(t, Options{Operator: &fakeOperator{}})
	if v := g.s.verbsFor(StatusAwaitingApproval); strings.Join(v, ",") != "cancel" {
		t.Errorf("without an approver: %v", v)
	}
}

// The inbox: newest first, paged by keyset, filtered, searched.
func TestInboxPagesFiltersSearch(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2})
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var msgs []*schema.Message
	for i, w := range []string{"apple pie", "banana split", "cherry tart", "apple crumble", "durian"} {
		p := schema.Slack
		if i%2 == 0 {
			p = schema.Email
		}
		m := testutil.Message(p, "m"+string(rune('a'+i)), base.Add(time.Duration(i)*time.Minute), w)
		msgs = append(msgs, m)
	}
	f.deliver(t, msgs...)
	if _, err := f.mb.Claim(context.Background(), msgs[1].ID, "bot@me", time.Hour); err != nil {
		t.Fatal(err)
	}
	c := f.client(t)
	f.login(t, c)
	order := func(body string) []string {
		var ids []string
		for _, part := range strings.Split(body, `class="msg" data-id="`)[1:] {
			ids = append(ids, part[:strings.Index(part, `"`)])
		}
		return ids
	}
	_, body := get(t, c, f.srv.URL+"/ui/")
	if got := order(body); strings.Join(got, ",") != "email_me,slack_md" {
		t.Fatalf("page 1: %v", got)
	}
	next := body[strings.Index(body, `id="next" href="`)+len(`id="next" href="`):]
	next = strings.ReplaceAll(next[:strings.Index(next, `"`)], "&amp;", "&")
	_, body = get(t, c, f.srv.URL+next)
	if got := order(body); strings.Join(got, ",") != "email_mc,slack_mb" {
		t.Fatalf("page 2 (%s): %v", next, got)
	}
	for q, want := range map[string]string{
		"provider=slack":     "slack_md,slack_mb",
		"status=claimed":     "slack_mb",
		"agent=bot%40me":     "slack_mb",
		"provider=email&q=x": "",
	} {
		_, body := get(t, c, f.srv.URL+"/ui/?"+q)
		if got := strings.Join(order(body), ","); got != want {
			t.Errorf("%s: %s, want %s", q, got, want)
		}
	}
	// The hub indexes for search.
	f.s.hub.indexSearch(context.Background(), nil, nil)
	_, body = get(t, c, f.srv.URL+"/ui/?q=apple")
	want := []string{}
	for i := len(msgs) - 1; i >= 0; i-- {
		if strings.Contains(msgs[i].Body, "apple") {
			want = append(want, msgs[i].ID)
		}
	}
	if got := order(body); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("search apple: %v, want %v", got, want)
	}
	if _, body = get(t, c, f.srv.URL+"/ui/?q=%22%29%28*+OR"); !strings.Contains(body, "No message.") {
		t.Fatalf("a query of FTS syntax is words, not an error:\n%s", body)
	}
}

// A thread interleaves the inbound mail and our replies, each reply with
// its delivery: queued, and sent with the provider's id.
func TestThreadInterleaves(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	q := testutil.Message(schema.Email, "t1", at, "first question")
	f.deliver(t, q)
	sent := &schema.Draft{ID: "email_out_00000000000000000000000000000001", Provider: schema.Email, To: schema.Recipients{"ann@example.com"},
		Subject: "Re: Subject t1", ThreadKey: q.Session.ThreadKey, CorrelationID: "task_9", CreatedAt: schema.TimePtr(at.Add(time.Minute)), Agent: "bot", Body: "first answer\n"}
	rel, err := f.mb.Queue(ctx, sent)
	if err != nil {
		t.Fatal(err)
	}
	sent.Delivery = &schema.Delivery{Status: "sent", ProviderMessageID: "<abc@corp.example>"}
	if _, err := f.mb.FinishDelivery(ctx, sent, rel, mailbox.BoxArchive); err != nil {
		t.Fatal(err)
	}
	q2 := testutil.Message(schema.Email, "t2", at.Add(2*time.Minute), "second question")
	q2.Session = q.Session
	f.deliver(t, q2)
	queued := &schema.Draft{ID: "email_out_00000000000000000000000000000002", Provider: schema.Email, To: schema.Recipients{"ann@example.com"},
		Subject: "Re: Subject t1", ThreadKey: q.Session.ThreadKey, CreatedAt: schema.TimePtr(at.Add(3 * time.Minute)), Agent: "bot", Body: "second answer\n"}
	if _, err := f.mb.Queue(ctx, queued); err != nil {
		t.Fatal(err)
	}
	c := f.client(t)
	f.login(t, c)
	resp, body := get(t, c, f.srv.URL+"/ui/thread/"+q.ID)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("thread: %s\n%s", resp.Status, body)
	}
	var order []string
	for _, part := range strings.Split(body, `data-id="`)[1:] {
		order = append(order, part[:strings.Index(part, `"`)])
	}
	if want := []string{q.ID, sent.ID, q2.ID, queued.ID}; strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("thread order %v, want %v", order, want)
	}
	for _, want := range []string{"sent as &lt;abc@corp.example&gt;", `<span class="delivery">queued</span>`, "corr task_9", "reply by bot"} {
		if !strings.Contains(body, want) {
			t.Errorf("the thread lacks %q:\n%s", want, body)
		}
	}
}

// The live feed sends a journal event as soon as the mail is filed, and a
// claim within the poll.
func TestEventsFollowTheJournal(t *testing.T) {
	f := newFixture(t, Options{Poll: 100 * time.Millisecond})
	f.s.Start(context.Background())
	defer f.s.Stop(context.Background())
	c := f.client(t)
	f.login(t, c)
	resp, err := c.Get(f.srv.URL + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				lines <- string(buf[:n])
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	var seen strings.Builder
	wait := func(want string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %q", want)
				}
				seen.WriteString(l)
				if strings.Contains(seen.String(), want) {
					seen.Reset()
					return
				}
			case <-deadline:
				t.Fatalf("no %q in 5 s; the stream said %q", want, seen.String())
			}
		}
	}
	wait(": live")
	m := testutil.Message(schema.Slack, "live1", time.Now(), "hello")
	f.deliver(t, m)
	wait("event: inbound\ndata: " + m.ID + "\n")
	// The indexer takes the new message from the journal: searchable.
	if !testutil.Poll(5*time.Second, func() bool {
		_, body := get(t, c, f.srv.URL+"/ui/?q=hello")
		return strings.Contains(body, `data-id="`+m.ID+`"`)
	}) {
		t.Fatal("the new message is not searchable in 5 s")
	}
	if _, err := f.mb.Claim(context.Background(), m.ID, "bot", time.Minute); err != nil {
		t.Fatal(err)
	}
	wait("event: state\n")
}

// A message's page: the body rendered, the front matter behind a toggle,
// the attachment a download that is never shown inline.
func TestMessagePageAndAttachment(t *testing.T) {
	dz := testutil.NewDropzone(t, nil)
	f := newFixture(t, Options{Dropzone: dz})
	data := []byte("<html><script>alert(1)</script></html>")
	obj, err := dz.Put(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	m := testutil.Message(schema.Email, "att", time.Now(), "")
	m.Body = "Some **bold** text\n"
	m.Artifacts = []schema.Artifact{{ID: obj.ID, Name: "page.html", Type: schema.ArtifactDocument, MimeType: "text/html", Size: obj.Size, Path: obj.Path}}
	f.deliver(t, m)
	c := f.client(t)
	f.login(t, c)
	resp, body := get(t, c, f.srv.URL+"/ui/message/"+m.ID)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s\n%s", resp.Status, body)
	}
	for _, want := range []string{"<strong>bold</strong>", `<details id="frontmatter">`, "provider: email", `href="/ui/attachment/` + m.ID + `/0"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
	resp, got := get(t, c, f.srv.URL+"/ui/attachment/"+m.ID+"/0")
	h := resp.Header
	if resp.StatusCode != http.StatusOK || got != string(data) || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment;") ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("the attachment: %s %q %v", resp.Status, got, h)
	}
	if resp, _ := get(t, c, f.srv.URL+"/ui/attachment/"+m.ID+"/1"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a second attachment that is not there: %s", resp.Status)
	}
}

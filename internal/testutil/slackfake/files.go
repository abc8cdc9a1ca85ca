package slackfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/slack-go/slack"
)

// AddFile serves content as the file f at its url_private and
// url_private_download on the fake's host (/files-pri/TEAM-FILEID/...),
// the bytes to the bot token only; it returns f with those URLs, and an
// id, size and name when f had none.
func (s *Server) AddFile(f slack.File, content []byte) slack.File {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addFile(f, content)
}

func (s *Server) addFile(f slack.File, content []byte) slack.File {
	if f.ID == "" {
		f.ID = s.nextID("F")
	}
	if f.Name == "" {
		f.Name = f.ID
	}
	if f.Size == 0 {
		f.Size = len(content)
	}
	name := url.PathEscape(path.Base(f.Name))
	dir := "/files-pri/" + s.opts.TeamID + "-" + f.ID + "/"
	f.URLPrivate = s.base + dir + name
	f.URLPrivateDownload = s.base + dir + "download/" + name
	e := &file{f: f, content: bytes.Clone(content)}
	s.files[dir+name] = e
	s.files[dir+"download/"+name] = e
	return f
}

// RestrictFile makes a file AddFile serves answer the sign-in page, an
// HTML page with 200, even to the bot token: what Slack answers for a file
// the token's scopes do not reach (no files:read), and what slack-go's
// GetFile returns as the file's content without an error.
func (s *Server) RestrictFile(fileID string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for _, e := range s.files {
		if e.f.ID == fileID {
			e.restricted, found = true, true
		}
	}
	if !found {
		s.t.Fatalf("slackfake: RestrictFile: no file %q", fileID)
	}
}

// serveFile answers a file to the bot token; anything else is sent to the
// sign-in page, as Slack does (slack-go spots that redirect; a plain HTTP
// client follows it to an HTML page answered 200).
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls[FileDownload]++
	if f, failed := s.failure(FileDownload); failed {
		s.mu.Unlock()
		writeFailure(w, f)
		return
	}
	e := s.files[r.URL.Path]
	ok := !s.revoked && r.Header.Get("Authorization") == "Bearer "+s.opts.BotToken
	restricted := e != nil && e.restricted
	s.mu.Unlock()
	if ok && restricted {
		s.serveLogin(w, r)
		return
	}
	if !ok {
		http.Redirect(w, r, "/?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
		return
	}
	if e == nil {
		http.NotFound(w, r)
		return
	}
	ct := e.f.Mimetype
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(e.content)))
	w.Write(e.content)
}

// serveLogin is the workspace's sign-in page.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, "<!DOCTYPE html>\n<html><head><title>Sign in | Slack</title></head>"+
		"<body><form method=\"post\" action=\"/signin\">Sign in to Fake Team</form></body></html>\n")
}

func (s *Server) getUploadURLExternal(r *request) (map[string]any, error) {
	name := r.args.Get("filename")
	if name == "" {
		return nil, fail("invalid_arguments", "[ERROR] missing required field: filename")
	}
	length, err := strconv.ParseInt(r.args.Get("length"), 10, 64)
	if err != nil || length <= 0 {
		return nil, fail("invalid_arguments", "[ERROR] missing required field: length")
	}
	if length > s.opts.MaxUpload {
		return nil, fail("file_too_large")
	}
	id := s.nextID("F")
	s.pending[id] = &pendingUpload{id: id, filename: name, length: length}
	return map[string]any{"upload_url": s.base + "/upload/v1/" + id, "file_id": id}, nil
}

// serveUpload takes a file's bytes, as a multipart form's "file" (what
// slack-go sends) or the raw body, and checks they are the length
// files.getUploadURLExternal was told.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/upload/v1/")
	s.mu.Lock()
	s.calls[FileUpload]++
	f, failed := s.failure(FileUpload)
	p := s.pending[id]
	s.mu.Unlock()
	if failed {
		writeFailure(w, f)
		return
	}
	if r.Method != http.MethodPost || p == nil {
		http.NotFound(w, r)
		return
	}
	content, err := readUpload(w, r, p.length)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	p.content, p.uploaded = content, true
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "OK - %d", len(content))
}

func readUpload(w http.ResponseWriter, r *http.Request, length int64) ([]byte, error) {
	// The body holds the file and, in a form, a few hundred bytes more.
	body := http.MaxBytesReader(w, r.Body, length+64<<10)
	var src io.Reader = body
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err != nil {
				return nil, fmt.Errorf("slackfake: upload: no file part: %v", err)
			}
			if part.FormName() == "file" {
				src = part
				break
			}
		}
	}
	content, err := io.ReadAll(io.LimitReader(src, length+1))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, fmt.Errorf("slackfake: upload: body over %d bytes", length)
		}
		return nil, fmt.Errorf("slackfake: upload: %v", err)
	}
	if int64(len(content)) != length {
		return nil, fmt.Errorf("slackfake: upload: %d bytes where the length given was %d", len(content), length)
	}
	return content, nil
}

func (s *Server) completeUploadExternal(r *request) (map[string]any, error) {
	var files []slack.FileSummary
	if err := json.Unmarshal([]byte(r.args.Get("files")), &files); err != nil || len(files) == 0 {
		return nil, fail("invalid_arguments", "[ERROR] missing required field: files")
	}
	var ps []*pendingUpload
	for _, f := range files {
		p := s.pending[f.ID]
		if p == nil || !p.uploaded {
			return nil, fail("file_not_found")
		}
		ps = append(ps, p)
	}
	channel := r.args.Get("channel_id")
	if channel == "" {
		channel = r.args.Get("channels")
	}
	if strings.Contains(channel, ",") {
		return nil, fail("invalid_arguments", "[ERROR] one channel only")
	}
	var c *conv
	var parent int64
	if channel != "" {
		var err error
		if c, err = s.postable(channel); err != nil {
			return nil, err
		}
		if parent, err = c.thread(r.args.Get("thread_ts")); err != nil {
			return nil, err
		}
	} else if r.args.Get("thread_ts") != "" {
		return nil, fail("invalid_arguments", "[ERROR] thread_ts needs a channel")
	}
	comment := r.args.Get("initial_comment")
	var shared []slack.File
	for i, p := range ps {
		delete(s.pending, p.id)
		title := files[i].Title
		if title == "" {
			title = p.filename
		}
		f := s.addFile(slack.File{ID: p.id, Name: p.filename, Title: title, User: s.opts.BotUserID}, p.content)
		shared = append(shared, f)
		u := Upload{FileID: p.id, Filename: p.filename, Title: title, Content: p.content,
			ThreadTS: r.args.Get("thread_ts"), InitialComment: comment}
		if c != nil {
			u.ChannelID = c.ch.ID
		}
		s.uploads = append(s.uploads, u)
	}
	if c != nil {
		// The share is a message of the bot's in the conversation, as in
		// Slack's history.
		ts := s.nextTS()
		fields := map[string]json.RawMessage{
			"type": mustJSON("message"), "user": mustJSON(s.opts.BotUserID), "bot_id": mustJSON(s.opts.BotID),
			"text": mustJSON(comment), "ts": mustJSON(formatTS(ts)), "files": mustJSON(shared),
			"upload": mustJSON(true), "team": mustJSON(s.opts.TeamID),
		}
		if parent != 0 {
			fields["thread_ts"] = mustJSON(formatTS(parent))
		}
		c.insert(&stored{ts: ts, threadTS: parent, fields: fields})
	}
	return map[string]any{"files": files}, nil
}

package slack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/internal/chatmsg"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
)

// Files of a message are fetched with the bot token and streamed into the
// dropzone as artifacts. The token is a key to the whole workspace, and the
// URL to fetch comes from an event, which anyone who can post can shape (a
// remote file's url_private is whatever its creator chose): so the token
// goes only to Slack's own hosts over https (slack.com, slack-gov.com and
// their subdomains) or to the configured api_url's host, never to another
// host, not even after a redirect (tokenHost, and the client's
// CheckRedirect).
//
// What becomes of a file that cannot be fetched depends on whether trying
// again could help: a network error, a timeout, a 5xx or a 429 fails the
// event (the transport does not ack, and Slack sends it again); a file that
// is gone (404), refused, too large, or answered with an HTML page (the
// app lacks files:read, or only the file's owner may see it: Slack answers
// 200 with a sign-in page, which slack-go would store as the file) leaves
// the message written without it, the reason in metadata.extra.files and
// the log.

// maxFiles bounds the files fetched for one message. Slack lets a person
// attach ten; an event naming more is not Slack's.
const maxFiles = 20

// file is a file object of a message event (the fields Courier reads).
type file struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Title              string `json:"title"`
	Mimetype           string `json:"mimetype"`
	Filetype           string `json:"filetype"`
	Mode               string `json:"mode"`
	Size               int64  `json:"size"`
	IsExternal         bool   `json:"is_external"`
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
}

// fileNote is what metadata.extra.files says of a file that is not an
// artifact of the message, and why.
type fileNote struct {
	ID     string `json:"id,omitempty"`
	Name   string `json:"name,omitempty"`
	Reason string `json:"reason"`
}

// errSkip marks a file that will not be fetched however often one tries:
// the message is written without it.
type errSkip struct {
	reason string
	health bool // worth a line on /health: the app's setup is wrong
}

func (e *errSkip) Error() string { return "slack: " + e.reason }

func skip(format string, args ...any) error { return &errSkip{reason: fmt.Sprintf(format, args...)} }

// slackDomains are the domains whose hosts may receive the bot token
// (GovSlack included); slack-go's own file download trusts the same.
var slackDomains = []string{"slack.com", "slack-gov.com"}

// tokenHost reports whether u may receive the bot token: an https URL on a
// Slack host, or a URL of the configured api_url's scheme and host.
func (a *Adapter) tokenHost(u *url.URL) bool {
	if u == nil || u.User != nil {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if u.Scheme == "https" && host != "" {
		for _, d := range slackDomains {
			if host == d || strings.HasSuffix(host, "."+d) {
				return true
			}
		}
	}
	api, err := url.Parse(a.apiURL)
	if err != nil || api.Host == "" {
		return false
	}
	return u.Scheme == api.Scheme && strings.EqualFold(u.Host, api.Host)
}

// fileClient is a.http with a CheckRedirect that follows a redirect only
// to a host that may receive the token (the net/http client itself drops
// the Authorization header when the host changes; this refuses the hop
// altogether, so no request at all goes elsewhere) and at most 5 times.
func (a *Adapter) fileClient() *http.Client {
	c := *a.http
	// The client's overall timeout suits API calls, not a file of 100 MB
	// on a slow link: fetchFile bounds each download by its size instead.
	c.Timeout = 0
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return skip("file download: too many redirects")
		}
		if !a.tokenHost(req.URL) {
			return skip("file download redirected to %s, which is not Slack's: not followed", hostOf(req.URL))
		}
		return nil
	}
	return &c
}

func hostOf(u *url.URL) string {
	if u == nil {
		return "?"
	}
	return u.Scheme + "://" + u.Host
}

// fetchFiles stores the files of a message in batch and returns the
// artifacts and the notes on the files left out. The error is one worth
// retrying (the event is then not acknowledged).
func (a *Adapter) fetchFiles(ctx context.Context, files []file, batch *dropzone.Batch) ([]schema.Artifact, []fileNote, error) {
	var arts []schema.Artifact
	var notes []fileNote
	for i, f := range files {
		if i >= maxFiles {
			notes = append(notes, fileNote{Reason: fmt.Sprintf("%d more files not fetched: at most %d a message", len(files)-maxFiles, maxFiles)})
			break
		}
		art, err := a.fetchFile(ctx, f, batch)
		var s *errSkip
		switch {
		case errors.As(err, &s):
			notes = append(notes, fileNote{ID: f.ID, Name: dropzone.SanitizeName(f.Name), Reason: s.reason})
			a.log.Warn("slack: file not stored; the message is written without it", "file", f.ID, "reason", s.reason)
			if s.health {
				a.health.Error(fmt.Errorf("slack: file %s not stored: %s", f.ID, s.reason))
			}
		case err != nil:
			return nil, nil, adapters.Temporary(err)
		default:
			arts = append(arts, art)
		}
	}
	return arts, notes, nil
}

// fetchFile downloads one file into batch.
func (a *Adapter) fetchFile(ctx context.Context, f file, batch *dropzone.Batch) (schema.Artifact, error) {
	u, err := a.fileURL(f)
	if err != nil {
		return schema.Artifact{}, err
	}
	// A minute, and a second more for every 64 KiB the file may have: a
	// download that crawls slower than that (a stalled connection) gives
	// up, and the event is tried again.
	size := f.Size
	if size <= 0 {
		size = a.limits.MaxArtifactBytes
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(max(size, 0)>>16)*time.Second)
	defer cancel()
	resp, err := a.download(ctx, f, u)
	if err != nil {
		return schema.Artifact{}, err
	}
	defer resp.Body.Close()
	obj, err := a.storeFile(ctx, f, u, resp, batch)
	if err != nil {
		return schema.Artifact{}, err
	}
	return fileArtifact(f, obj), nil
}

// fileURL is where a file is fetched from, or why it is not.
func (a *Adapter) fileURL(f file) (*url.URL, error) {
	switch f.Mode {
	case "tombstone":
		return nil, skip("file was deleted (mode tombstone): no content to fetch")
	case "hidden_by_limit":
		return nil, skip("file is hidden by the workspace's plan limit (mode hidden_by_limit): no content to fetch")
	case "external":
		return nil, skip("file is hosted outside Slack (mode external): its content is not fetched")
	}
	if f.IsExternal {
		return nil, skip("file is hosted outside Slack (is_external): its content is not fetched")
	}
	if max := a.limits.MaxArtifactBytes; max > 0 && f.Size > max {
		return nil, skip("file is %d bytes, over the %d an artifact may have (courier.limits.max_artifact_bytes)", f.Size, max)
	}
	raw := f.URLPrivateDownload
	if raw == "" {
		raw = f.URLPrivate
	}
	if raw == "" {
		return nil, skip("file has no url_private: nothing to fetch")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return nil, skip("file URL is not an absolute URL")
	}
	if !a.tokenHost(u) {
		// Never the token to a host an event names; not even a
		// request without it, which would tell that host who reads
		// the workspace.
		return nil, skip("file URL is on %s, which is not Slack's: not fetched", hostOf(u))
	}
	if !filePath(u) {
		// On Slack's host, the token opens every API method: a
		// url_private naming one (chat.postMessage?channel=...) would
		// make the download a call.
		return nil, skip("file URL is not a path Slack serves files at (/files-pri/, /files-tmb/): not fetched")
	}
	return u, nil
}

// filePaths are the paths Slack serves files at, with the bot token: the
// file itself and its thumbnails (the fakes serve them alike).
var filePaths = []string{"/files-pri/", "/files-tmb/"}

// filePath reports whether u names a file where Slack serves them: one of
// filePaths, without a dot segment or an empty one, which a server could
// resolve to somewhere else (/files-pri/../api/chat.postMessage), nor an
// escaped slash, dot or backslash that a server might decode first.
func filePath(u *url.URL) bool {
	p := strings.ToLower(u.EscapedPath())
	if strings.Contains(p, "%2e") || strings.Contains(p, "%2f") || strings.Contains(p, "%5c") || path.Clean(u.Path) != u.Path {
		return false
	}
	for _, prefix := range filePaths {
		if strings.HasPrefix(u.Path, prefix) && len(u.Path) > len(prefix) {
			return true
		}
	}
	return false
}

// download asks for a file with the bot token and returns the answer when
// it is the file's (200).
func (a *Adapter) download(ctx context.Context, f file, u *url.URL) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, skip("file URL not usable")
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.BotToken.Reveal())
	resp, err := a.fileClient().Do(req)
	if err != nil {
		var s *errSkip
		if errors.As(err, &s) {
			return nil, s
		}
		// url.Error quotes the URL, never the header: no token here.
		return nil, fmt.Errorf("slack: fetch file %s: %w", f.ID, netCause(err))
	}
	var fail error
	switch {
	case resp.StatusCode == http.StatusOK:
		return resp, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		fail = fmt.Errorf("slack: fetch file %s: %s", f.ID, resp.Status)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		fail = skip("file download answered %s to %s: not followed", resp.Status, redirectHost(resp))
	default:
		fail = &errSkip{reason: "file download answered " + resp.Status, health: resp.StatusCode == 401 || resp.StatusCode == 403}
	}
	resp.Body.Close()
	return nil, fail
}

// storeFile puts the body of a file's download into batch, unless it is a
// sign-in page rather than the file, within the artifact limit.
func (a *Adapter) storeFile(ctx context.Context, f file, u *url.URL, resp *http.Response, batch *dropzone.Batch) (dropzone.Object, error) {
	// slack-go's own check: without access, files.slack.com redirects
	// to the workspace's sign-in page with redir set to the file's path.
	if fin := resp.Request; fin != nil && fin.URL.Path != u.Path {
		if redir := fin.URL.Query().Get("redir"); redir != "" && redir == u.Path {
			return dropzone.Object{}, htmlPage()
		}
	}
	br := bufio.NewReaderSize(resp.Body, 4096)
	if !htmlExpected(f) {
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		head, _ := br.Peek(512)
		if ct == "text/html" || looksHTML(head) {
			return dropzone.Object{}, htmlPage()
		}
	}
	max := a.limits.MaxArtifactBytes
	body := io.Reader(br)
	var lim *chatmsg.LimitReader
	if max > 0 {
		lim = &chatmsg.LimitReader{R: br, N: max}
		body = lim
	}
	obj, err := batch.Put(body)
	switch {
	case lim != nil && lim.Over(), errors.Is(err, dropzone.ErrTooLarge):
		return dropzone.Object{}, skip("file is over the %d bytes an artifact may have (courier.limits.max_artifact_bytes)", max)
	case err != nil && ctx.Err() == nil && !isNetErr(err):
		return dropzone.Object{}, fmt.Errorf("slack: store file %s: %w", f.ID, err)
	case err != nil:
		return dropzone.Object{}, fmt.Errorf("slack: fetch file %s: %w", f.ID, netCause(err))
	}
	return obj, nil
}

// fileArtifact is the artifact of a file stored as obj.
func fileArtifact(f file, obj dropzone.Object) schema.Artifact {
	name := f.Name
	if strings.TrimSpace(name) == "" {
		name = f.Title
	}
	if strings.TrimSpace(name) == "" && f.Filetype != "" {
		name = f.ID + "." + f.Filetype
	}
	name = dropzone.SanitizeName(name)
	media := strings.TrimSpace(f.Mimetype)
	if _, _, err := mime.ParseMediaType(media); err != nil {
		media = "application/octet-stream"
	}
	return schema.Artifact{
		ID: obj.ID, Name: name, Type: schema.ArtifactTypeOf(media, name),
		MimeType: media, Size: obj.Size, Path: obj.Path,
	}
}

func htmlPage() error {
	return &errSkip{health: true, reason: "file download answered an HTML page, not the file (the app may lack the files:read scope, or only the file's owner may see it)"}
}

func redirectHost(resp *http.Response) string {
	loc, err := resp.Location()
	if err != nil {
		return "?"
	}
	return hostOf(loc)
}

// htmlExpected reports whether the file itself may be HTML: by its
// mimetype, or by its type or name (Slack labels an uploaded file.htm
// text/plain), so that a page someone shared is stored, not taken for a
// sign-in page.
func htmlExpected(f file) bool {
	t, _, _ := mime.ParseMediaType(f.Mimetype)
	if t == "text/html" || t == "application/xhtml+xml" {
		return true
	}
	switch strings.ToLower(f.Filetype) {
	case "html", "htm", "xhtml":
		return true
	}
	n := strings.ToLower(f.Name)
	return strings.HasSuffix(n, ".html") || strings.HasSuffix(n, ".htm") || strings.HasSuffix(n, ".xhtml")
}

// looksHTML reports whether head starts like an HTML document.
func looksHTML(head []byte) bool {
	head = bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n")
	for _, p := range []string{"<!doctype html", "<html"} {
		if len(head) >= len(p) && strings.EqualFold(string(head[:len(p)]), p) {
			return true
		}
	}
	return false
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// netCause drops the *url.Error wrapper's URL when it carries a query
// (a signed link would be a secret); the error stays matchable.
func netCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.RawQuery != "" {
			return fmt.Errorf("%s %s://%s%s: %w", ue.Op, u.Scheme, u.Host, u.Path, ue.Err)
		}
	}
	return err
}

package lark

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/internal/chatmsg"
	"github.com/monoco/courier/adapters/lark/internal/content"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Resources (images, files, audio, video) are fetched over plain HTTP, not
// through the SDK: SDK v3.11.0 reads a download whole into memory, and a
// file may be 100 MB. The tenant token goes only to the configured base
// URL's scheme and host: the path is built from the event's keys, escaped,
// and a redirect anywhere else is refused (CheckRedirect), so no event can
// send the token elsewhere.

// Lark's codes for a missing or an invalid (expired) tenant token: the
// token is fetched again, once.
const (
	codeMissingToken = 99991661
	codeInvalidToken = 99991663
)

// tokenMargin is how long before its expiry a cached token is given up:
// a call started with it must not reach Lark after it expired.
const tokenMargin = 3 * time.Minute

// tokens fetches and caches the tenant_access_token. SDK v3.11.0 keeps its
// tokens in a process-wide cache and does not renew one Lark refused, so
// the adapter keeps its own.
type tokens struct {
	mu    sync.Mutex
	token string
	until time.Time
}

// tenantToken returns a token valid for a while; fresh forces a new one
// (the cached one was refused).
func (a *Adapter) tenantToken(ctx context.Context, fresh bool) (string, error) {
	a.tok.mu.Lock()
	defer a.tok.mu.Unlock()
	if !fresh && a.tok.token != "" && time.Now().Before(a.tok.until) {
		return a.tok.token, nil
	}
	body, _ := json.Marshal(map[string]string{"app_id": a.cfg.AppID, "app_secret": a.cfg.AppSecret.Reveal()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/open-apis/auth/v3/tenant_access_token/internal", bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("lark: tenant token: %w", err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := a.apiClient().Do(req)
	if err != nil {
		return "", adapters.Temporary(fmt.Errorf("lark: tenant token: %w", err))
	}
	defer resp.Body.Close()
	var r struct {
		Code   int    `json:"code"`
		Msg    string `json:"msg"`
		Token  string `json:"tenant_access_token"`
		Expire int64  `json:"expire"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&r); err != nil {
		return "", adapters.Temporary(fmt.Errorf("lark: tenant token: %s, body not Lark's JSON", resp.Status))
	}
	switch {
	case r.Code == codeRateLimited || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return "", adapters.Temporary(fmt.Errorf("lark: tenant token: %s (code %d)", resp.Status, r.Code))
	case r.Code != 0 || r.Token == "":
		// Lark's msg names the bad field ("app secret invalid"),
		// never the secret itself.
		return "", adapters.Refused(fmt.Errorf("lark: tenant token refused (code %d: %s): check courier.adapters.lark.app_id and app_secret", r.Code, clip(a.redactSecret(r.Msg), 200)))
	}
	life := time.Duration(r.Expire) * time.Second
	a.tok.token = r.Token
	a.tok.until = time.Now().Add(life - tokenMargin)
	if life <= tokenMargin {
		// A token this short-lived is used once, then refetched.
		a.tok.until = time.Now()
	}
	return r.Token, nil
}

// apiClient is the HTTP client for Lark's API: redirects are not followed
// to another host than the base URL's.
func (a *Adapter) apiClient() *http.Client {
	c := *a.http
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return skip("too many redirects")
		}
		if !a.tokenHost(req.URL) {
			return skip("redirected to %s, which is not the configured Lark host: not followed", req.URL.Scheme+"://"+req.URL.Host)
		}
		return nil
	}
	return &c
}

// tokenHost reports whether u may receive the tenant token: the scheme and
// host of the configured base URL, nothing else.
func (a *Adapter) tokenHost(u *url.URL) bool {
	b, err := url.Parse(a.base)
	if err != nil || u == nil || u.User != nil {
		return false
	}
	return u.Scheme == b.Scheme && strings.EqualFold(u.Host, b.Host)
}

// errSkip marks a resource that no retry will fetch: the message is written
// without it, the reason in metadata.extra.resources.
type errSkip struct{ reason string }

func (e *errSkip) Error() string { return "lark: " + e.reason }

func skip(format string, args ...any) error { return &errSkip{reason: fmt.Sprintf(format, args...)} }

// resourceNote is what metadata.extra.resources says of a resource not
// stored, and why.
type resourceNote struct{ Key, Kind, Reason string }

// fetchResources stores the message's resources in batch. The error is
// one worth retrying; on the catch-up's last try at the message (lastTry)
// there is none: what still fails is noted.
func (a *Adapter) fetchResources(ctx context.Context, messageID string, rs []content.Resource, batch *dropzone.Batch, lastTry bool) ([]schema.Artifact, []resourceNote, error) {
	var arts []schema.Artifact
	var notes []resourceNote
	for _, r := range rs {
		art, err := a.fetchResource(ctx, messageID, r, batch)
		var s *errSkip
		switch {
		case errors.As(err, &s):
			notes = append(notes, resourceNote{Key: clip(r.Key, 200), Kind: r.Kind, Reason: s.reason})
			a.log.Warn("lark: resource not stored; the message is written without it", "message_id", messageID, "key", clip(r.Key, 200), "reason", s.reason)
		case err != nil && !givesUp(ctx, lastTry):
			return nil, nil, adapters.Temporary(err)
		case err != nil:
			// The catch-up's last try at this message (history.go): it is
			// written without the resource rather than never.
			reason := "still failing after the catch-up's tries: " + clip(a.redact(err.Error()), 300)
			notes = append(notes, resourceNote{Key: clip(r.Key, 200), Kind: r.Kind, Reason: reason})
			a.log.Warn("lark: resource not stored; the message is written without it", "message_id", messageID, "key", clip(r.Key, 200), "reason", reason)
		default:
			arts = append(arts, art)
		}
	}
	return arts, notes, nil
}

// fetchResource streams one resource into batch, fetching the token again
// once if Lark refuses it.
func (a *Adapter) fetchResource(ctx context.Context, messageID string, r content.Resource, batch *dropzone.Batch) (schema.Artifact, error) {
	if a.dz == nil || batch == nil {
		return schema.Artifact{}, skip("no dropzone to store resources in")
	}
	if r.Key == "" {
		return schema.Artifact{}, skip("resource without a key")
	}
	typ := r.Type
	if typ != "image" && typ != "file" {
		return schema.Artifact{}, skip("resource type %q is not image or file", clip(typ, 40))
	}
	u := a.base + "/open-apis/im/v1/messages/" + url.PathEscape(messageID) + "/resources/" + url.PathEscape(r.Key) + "?type=" + typ
	for attempt := 0; ; attempt++ {
		tok, err := a.tenantToken(ctx, attempt > 0)
		if err != nil {
			return schema.Artifact{}, err
		}
		art, retryToken, err := a.download(ctx, u, tok, r, batch)
		if retryToken && attempt == 0 {
			continue
		}
		return art, err
	}
}

// download does one GET; retryToken says Lark refused the token.
func (a *Adapter) download(ctx context.Context, u, tok string, r content.Resource, batch *dropzone.Batch) (art schema.Artifact, retryToken bool, err error) {
	max := a.limits.MaxArtifactBytes
	if max <= 0 {
		max = 100 << 20
	}
	// A minute, and a second more for every 64 KiB the file may have.
	ctx, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(max>>16)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return art, false, skip("resource URL not usable")
	}
	if !a.tokenHost(req.URL) {
		return art, false, skip("resource URL is not on the configured Lark host")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	c := a.apiClient()
	c.Timeout = 0 // bounded by ctx, by the size
	resp, err := c.Do(req)
	if err != nil {
		var s *errSkip
		if errors.As(err, &s) {
			return art, false, s
		}
		return art, false, fmt.Errorf("lark: fetch resource %s: %w", clip(r.Key, 200), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		switch {
		case e.Code == codeMissingToken || e.Code == codeInvalidToken:
			return art, true, fmt.Errorf("lark: fetch resource %s: tenant token refused (code %d)", clip(r.Key, 200), e.Code)
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || e.Code == 99991400:
			return art, false, fmt.Errorf("lark: fetch resource %s: %s", clip(r.Key, 200), resp.Status)
		default:
			return art, false, skip("resource download answered %s (code %d: %s)", resp.Status, e.Code, clip(a.redact(e.Msg), 200))
		}
	}
	if resp.ContentLength > max {
		return art, false, skip("resource is %d bytes, over the %d an artifact may have (courier.limits.max_artifact_bytes)", resp.ContentLength, max)
	}
	// Lark serves every resource as application/octet-stream and names
	// only files: an image's type is read from its first bytes.
	br := bufio.NewReaderSize(resp.Body, 4096)
	head, _ := br.Peek(512)
	lim := &chatmsg.LimitReader{R: br, N: max}
	obj, err := batch.Put(lim)
	switch {
	case lim.Over(), errors.Is(err, dropzone.ErrTooLarge):
		return art, false, skip("resource is over the %d bytes an artifact may have (courier.limits.max_artifact_bytes)", max)
	case err != nil:
		return art, false, fmt.Errorf("lark: fetch resource %s: %w", clip(r.Key, 200), err)
	}
	name := r.Name
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil && strings.TrimSpace(name) == "" {
		name = params["filename"]
	}
	media := mime.TypeByExtension(extOf(name))
	if media == "" {
		media = kindMedia(r.Kind, http.DetectContentType(head))
	}
	if strings.TrimSpace(name) == "" {
		name = r.Kind + "-" + r.Key + mediaExt[strings.TrimSpace(strings.Split(media, ";")[0])]
	}
	name = dropzone.SanitizeName(name)
	return schema.Artifact{ID: obj.ID, Name: name, Type: schema.ArtifactTypeOf(media, name), MimeType: media, Size: obj.Size, Path: obj.Path}, false, nil
}

// mediaExt names the file of a resource Lark sent without a name.
var mediaExt = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/bmp": ".bmp",
	"audio/ogg": ".ogg", "audio/opus": ".opus", "audio/mpeg": ".mp3", "audio/wave": ".wav", "video/mp4": ".mp4",
	"video/webm": ".webm", "text/plain": ".txt", "application/pdf": ".pdf",
}

// kindMedia is a resource's media type: what its first bytes say when that
// fits what Lark says it is (an audio message is audio), else what Lark
// sends for its kind (voice as Opus, video as MP4).
func kindMedia(kind, sniffed string) string {
	major, _, _ := strings.Cut(sniffed, "/")
	switch kind {
	case "audio":
		if sniffed == "application/ogg" {
			return "audio/ogg"
		}
		if major != "audio" {
			return "audio/opus"
		}
	case "media":
		if major != "video" {
			return "video/mp4"
		}
	case "image", "sticker":
		if major != "image" {
			return "application/octet-stream"
		}
	}
	return sniffed
}

func extOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i:]
	}
	return ""
}

// redact removes every secret of the config (the app secret, the
// verification token, the encrypt key) and the tenant token from a string
// that goes into a log or an error: a server may echo what it was sent,
// and an error may quote a request.
func (a *Adapter) redact(s string) string {
	a.tok.mu.Lock()
	defer a.tok.mu.Unlock()
	return a.redactSecret(s)
}

// redactSecret is redact for use with a.tok.mu held.
func (a *Adapter) redactSecret(s string) string {
	return confkit.Redact(s, a.tok.token, a.cfg.AppSecret.Reveal(), a.cfg.VerificationToken.Reveal(), a.cfg.EncryptKey.Reveal())
}

// clip bounds a string from outside before it goes into a log or an error.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

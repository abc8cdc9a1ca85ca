package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// call runs the hook once for items (one event, or a digest's).
func (r *Runner) call(ctx context.Context, h *hookState, items []*item) error {
	body, last, err := r.payload(ctx, h, items)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	start := r.now()
	if h.URL != "" {
		err = r.post(ctx, h, items, body)
	} else {
		err = r.exec(ctx, h, items, last, body)
	}
	if err == nil {
		r.log.Info("notify: hook ran", "hook", h.Name, "event", string(items[len(items)-1].kind), "id", last.id, "events", len(items), "took", r.now().Sub(start).Round(time.Millisecond))
	}
	return err
}

// target is the file an event's call names.
type target struct {
	id, path, provider, thread, correlation string
}

// payload reads each event's file where it is now (a message may have
// been archived since) and returns the JSON the hook gets: one object, or
// for a digest hook an array.
func (r *Runner) payload(ctx context.Context, h *hookState, items []*item) ([]byte, target, error) {
	var docs []json.RawMessage
	var last target
	for _, it := range items {
		v, t, err := r.read(ctx, it)
		if err != nil && (ctx.Err() != nil || errors.Is(err, mailbox.ErrBusy)) {
			return nil, last, err // the call fails, and is retried
		}
		if err != nil {
			// Gone since (reindexed away): nothing to tell; the call goes
			// on with the others.
			r.log.Warn("notify: an event's file cannot be read; left out of the call", "hook", h.Name, "id", it.id, "err", err)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, last, fmt.Errorf("notify: %s: %w", it.id, err)
		}
		docs = append(docs, b)
		last = t
	}
	if len(docs) == 0 {
		return nil, last, errGone
	}
	if h.Digest > 0 {
		b, err := json.Marshal(docs)
		return b, last, err
	}
	return docs[0], last, nil
}

// read reads an event's file where it is now: the message, the draft, or
// the dead letter of an inbound event that could not become a message
// (what the hook gets is then mailbox.DeadLetterInfo, its path the
// payload's).
func (r *Runner) read(ctx context.Context, it *item) (any, target, error) {
	if it.kind == mailbox.EventDead && mailbox.IsDeadLetterID(it.id) {
		dl, err := r.mb.DeadLetter(it.id)
		if err != nil {
			return nil, target{}, err
		}
		return dl, target{id: it.id, path: filepath.Join(r.opts.Root, dl.Path), provider: string(dl.Provider)}, nil
	}
	var v any
	var e *mailbox.Entry
	var err error
	if it.kind == mailbox.EventInbound {
		m, me, merr := r.mb.Message(ctx, it.id)
		v, e, err = m, me, merr
	} else {
		d, de, derr := r.mb.Draft(ctx, it.id)
		v, e, err = d, de, derr
	}
	if err != nil {
		return nil, target{}, err
	}
	return v, target{id: it.id, path: filepath.Join(r.opts.Root, e.Path), provider: string(e.Provider), thread: e.Session.ThreadKey, correlation: e.CorrelationID}, nil
}

// errGone is a call with nothing left to tell: it counts as done.
var errGone = fmt.Errorf("notify: every event's file is gone")

func deliveryID(h *hookState, items []*item) string {
	return h.Name + ":" + strconv.FormatInt(items[len(items)-1].seq, 10)
}

// env is the clean environment of an exec hook: none of the service's
// variables but those a program needs to run, so no secret the service
// got from its environment reaches a hook.
func (r *Runner) env(h *hookState, items []*item, t target) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	for k, v := range h.Env {
		env = append(env, k+"="+v)
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.id
	}
	return append(env, courierEnv(map[string]string{
		"COURIER_EVENT":          string(items[len(items)-1].kind),
		"COURIER_HOOK":           h.Name,
		"COURIER_DELIVERY_ID":    deliveryID(h, items),
		"COURIER_ROOT":           r.opts.Root,
		"COURIER_MESSAGE_ID":     t.id,
		"COURIER_MESSAGE_PATH":   t.path,
		"COURIER_PROVIDER":       t.provider,
		"COURIER_THREAD_KEY":     t.thread,
		"COURIER_CORRELATION_ID": t.correlation,
		"COURIER_COUNT":          strconv.Itoa(len(items)),
		"COURIER_MESSAGE_IDS":    strings.Join(ids, " "),
	})...)
}

// Bounds of the COURIER_* values: a sender writes the thread key (the
// first References id) and may make it any size; a value over Linux's
// 128 KiB per string fails exec with E2BIG, for good.
const (
	maxKeyEnv   = 1 << 10  // the thread key and the correlation id
	maxOtherEnv = 32 << 10 // every other value (a digest's ids)
)

// courierEnv is the COURIER_* variables of vars, sorted, each value but
// the paths without the control and bidirectional characters a sender
// could have put in it (schema.StripControls): a hook may print them to
// a terminal. Each is bounded (boundValue).
func courierEnv(vars map[string]string) []string {
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		if k != "COURIER_ROOT" && k != "COURIER_MESSAGE_PATH" {
			v, _ = schema.StripControls(v)
		}
		n := maxOtherEnv
		if k == "COURIER_THREAD_KEY" || k == "COURIER_CORRELATION_ID" {
			n = maxKeyEnv
		}
		env = append(env, k+"="+boundValue(v, n))
	}
	slices.Sort(env)
	return env
}

// boundValue returns s when it is at most n bytes; else its first bytes
// (whole UTF-8 characters) and "~" and the first 16 hex digits of the
// SHA-256 of the whole s, n bytes at most: two values that differ past
// the cut stay different.
func boundValue(s string, n int) string {
	if len(s) <= n {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := "~" + hex.EncodeToString(sum[:8])
	cut := n - len(suffix)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}

// permanentError is a call that cannot succeed on a retry: it goes to
// the hook's dead letters at once.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() + " (cannot succeed on a retry)" }
func (e *permanentError) Unwrap() error { return e.err }

// cannotRun reports whether err is exec failing to start the program in
// a way a retry cannot change: too long an environment (E2BIG), a
// program that is absent (ENOENT) or not executable (EACCES).
func cannotRun(err error) bool {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return false
	}
	return errors.Is(err, syscall.E2BIG) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES) || errors.Is(err, exec.ErrNotFound)
}

// outputGrace is how long a hook's output may stay open after it exited.
const outputGrace = time.Second

func (r *Runner) exec(ctx context.Context, h *hookState, items []*item, t target, body []byte) error {
	argv := h.Exec
	if h.Shell {
		argv = []string{"/bin/sh", "-c", h.Exec[0]}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = r.opts.Root
	cmd.Env = r.env(h, items, t)
	cmd.Stdin = bytes.NewReader(body)
	out := &capped{max: h.MaxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, killed whole on timeout: a shell's children
	// must not outlive the call (nor hold its output pipe open).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// The exit status decides. A process the hook left behind (a daemon
	// in a session of its own) may hold the output pipe open: it is cut
	// after this grace, and the call still succeeded.
	cmd.WaitDelay = outputGrace
	err := cmd.Run()
	if out.buf.Len() > 0 || out.dropped > 0 {
		r.log.Info("notify: hook output", "hook", h.Name, "id", t.id, "output", out.buf.String(), "dropped_bytes", out.dropped)
	}
	switch {
	case errors.Is(err, exec.ErrWaitDelay):
		r.log.Warn("notify: hook exited 0 but something it started kept its output open; output cut", "hook", h.Name, "id", t.id, "grace", outputGrace)
		return nil
	case ctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("timed out after %s", h.Timeout)
	case err != nil && cannotRun(err):
		return &permanentError{fmt.Errorf("%s: %w", filepath.Base(argv[0]), err)}
	case err != nil:
		return fmt.Errorf("%s: %w", filepath.Base(argv[0]), err)
	}
	return nil
}

// Sign returns the X-Courier-Signature of body at ts: "v0=" and the hex
// HMAC-SHA256 of "v0:<ts>:<body>" keyed with secret.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%d:", ts)
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

func (r *Runner) post(ctx context.Context, h *hookState, items []*item, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("notify: %s", redactURL(h.URL))
	}
	ts := r.now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "courier-notify")
	req.Header.Set("X-Courier-Event", string(items[len(items)-1].kind))
	req.Header.Set("X-Courier-Hook", h.Name)
	req.Header.Set("X-Courier-Delivery", deliveryID(h, items))
	req.Header.Set("X-Courier-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Courier-Signature", Sign(h.Secret, ts, body))
	resp, err := r.opts.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("POST %s: no answer in %s", redactURL(h.URL), h.Timeout)
		}
		// url.Error prints the URL: say it again without its userinfo.
		if ue, ok := err.(*url.Error); ok {
			return fmt.Errorf("POST %s: %v", redactURL(h.URL), ue.Err)
		}
		return fmt.Errorf("POST %s: %v", redactURL(h.URL), err)
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection when the rest is short
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST %s: %s: %s", redactURL(h.URL), resp.Status, oneLine(string(head), 200))
	}
	return nil
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(the hook's url)"
	}
	u.RawQuery = "" // a token in the query is a secret too
	return u.Redacted()
}

// capped keeps the first max bytes written and counts the rest. It is
// no bytes.Buffer itself: io.Copy would call the buffer's ReadFrom and
// read the whole output past the bound.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(p) {
		return c.buf.Write(p)
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

// limiter allows calls calls per per, as a sliding window of the start
// times of the last calls (a hook's rate is a few calls a minute: the
// window is that short; golang.org/x/time/rate would be a module for this
// one loop).
type limiter struct {
	calls int
	per   time.Duration
	times []time.Time
}

// take counts a call at now if the rate allows it; otherwise it returns
// when it will.
func (l *limiter) take(now time.Time) (time.Time, bool) {
	if l.calls <= 0 {
		return now, true
	}
	for len(l.times) > 0 && !l.times[0].Add(l.per).After(now) {
		l.times = l.times[1:]
	}
	if len(l.times) >= l.calls {
		return l.times[0].Add(l.per), false
	}
	l.times = append(l.times, now)
	return now, true
}

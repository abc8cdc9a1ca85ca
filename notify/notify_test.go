package notify

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

func ntMailbox(t *testing.T) *mailbox.Mailbox {
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
	return mb
}

// ntWrite makes messages durable through the mailbox's real write path,
// in one batch.
func ntWrite(t *testing.T, mb *mailbox.Mailbox, msgs ...*schema.Message) {
	t.Helper()
	in := make([]mailbox.Inbound, len(msgs))
	for i, m := range msgs {
		in[i] = mailbox.Inbound{Message: m}
	}
	if _, err := mb.WriteInbound(context.Background(), in, nil); err != nil {
		t.Fatal(err)
	}
}

func ntMsg(uid, thread string) *schema.Message {
	m := testutil.Message(schema.Slack, uid, time.Date(2026, 2, 6, 10, 0, 0, 0, time.UTC), "hello "+uid)
	m.Session.ThreadKey = schema.NullString(thread)
	return m
}

func ntStart(t *testing.T, mb *mailbox.Mailbox, hooks ...Hook) *Runner {
	t.Helper()
	r := New(mb, &Options{Hooks: hooks, Root: mb.Root, BackoffBase: 20 * time.Millisecond})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Stop(ctx)
	})
	return r
}

// ntCall is a request a url hook received.
type ntCall struct {
	header http.Header
	body   []byte
}

// ntServer is a url hook's receiver: each request goes on calls; fail
// decides the status it answers (nil: 200).
func ntServer(t *testing.T, fail func(c ntCall) int) (*httptest.Server, chan ntCall) {
	calls := make(chan ntCall, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c := ntCall{header: r.Header.Clone(), body: b}
		calls <- c
		if fail != nil {
			if code := fail(c); code != 0 {
				w.WriteHeader(code)
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, calls
}

func ntNext(t *testing.T, calls chan ntCall, what string) ntCall {
	t.Helper()
	select {
	case c := <-calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("no call: %s", what)
	}
	return ntCall{}
}

func ntNone(t *testing.T, calls chan ntCall, wait time.Duration) {
	t.Helper()
	select {
	case c := <-calls:
		t.Fatalf("an unexpected call: %s %s", c.header.Get("X-Courier-Delivery"), c.body)
	case <-time.After(wait):
	}
}

// ntHookEnv waits for an exec hook to write a line to fifo, then reads
// the environment it saved (env > path).
func ntHookEnv(t *testing.T, fifo, path string) map[string]string {
	t.Helper()
	f, err := os.Open(fifo) // blocks until the hook opens it to write
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(f).ReadString('\n')
	f.Close()
	env := map[string]string{}
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// An exec hook gets the message's facts in its environment, its front
// matter and body as JSON on stdin, and nothing of the service's own
// environment.
func TestExecHookEnvironmentAndStdin(t *testing.T) {
	mb := ntMailbox(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "done")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COURIER_TEST_SECRET_ENV", "hunter2")
	script := `env > "$OUT/env"; cat > "$OUT/stdin"; echo to-the-log; echo ok > "$FIFO"`
	ntStart(t, mb, Hook{Name: "wake", Exec: []string{script}, Shell: true, Env: map[string]string{"OUT": dir, "FIFO": fifo}})
	m := ntMsg("C1_1700000000_000100", "1700000000.000100")
	m.CorrelationID = "bug_7"
	ntWrite(t, mb, m)

	env := ntHookEnv(t, fifo, filepath.Join(dir, "env"))
	e, err := mb.Get(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"COURIER_EVENT": "inbound", "COURIER_HOOK": "wake", "COURIER_MESSAGE_ID": m.ID, "COURIER_PROVIDER": "slack",
		"COURIER_THREAD_KEY": "1700000000.000100", "COURIER_CORRELATION_ID": "bug_7", "COURIER_COUNT": "1",
		"COURIER_MESSAGE_IDS": m.ID, "COURIER_MESSAGE_PATH": filepath.Join(mb.Root, e.Path), "COURIER_ROOT": mb.Root,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if !strings.HasPrefix(env["COURIER_DELIVERY_ID"], "wake:") {
		t.Errorf("COURIER_DELIVERY_ID = %q", env["COURIER_DELIVERY_ID"])
	}
	if _, ok := env["COURIER_TEST_SECRET_ENV"]; ok {
		t.Error("the service's environment reached the hook")
	}
	var got schema.Message
	b, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("stdin is not the message as JSON: %v\n%s", err, b)
	}
	if got.ID != m.ID || got.Body != m.Body || string(got.Content.Text) != string(m.Content.Text) || got.Session.ThreadKey != m.Session.ThreadKey {
		t.Errorf("stdin: %s", b)
	}
}

// A url hook's POST is signed as Slack signs its requests: an HMAC-SHA256
// of "v0:<timestamp>:<body>" with the hook's secret.
func TestURLHookSigned(t *testing.T) {
	mb := ntMailbox(t)
	srv, calls := ntServer(t, nil)
	ntStart(t, mb, Hook{Name: "web", URL: srv.URL + "/hook", Secret: "s3cret"})
	m := ntMsg("C1_1700000000_000200", "")
	ntWrite(t, mb, m)
	c := ntNext(t, calls, "the message's POST")
	ts, err := strconv.ParseInt(c.header.Get("X-Courier-Timestamp"), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
		t.Fatalf("X-Courier-Timestamp %q", c.header.Get("X-Courier-Timestamp"))
	}
	if got, want := c.header.Get("X-Courier-Signature"), ntHMAC("s3cret", ts, c.body); got != want {
		t.Errorf("signature %q, want %q", got, want)
	}
	if got := c.header.Get("X-Courier-Signature"); got == ntHMAC("other", ts, c.body) {
		t.Error("the signature does not depend on the secret")
	}
	if c.header.Get("X-Courier-Event") != "inbound" || c.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", c.header)
	}
	var got schema.Message
	if err := json.Unmarshal(c.body, &got); err != nil || got.ID != m.ID {
		t.Errorf("body %s (%v)", c.body, err)
	}
}

// A redirect is not followed: it is a failure, retried, and the target is
// never called.
func TestURLHookRedirectNotFollowed(t *testing.T) {
	mb := ntMailbox(t)
	target, hit := ntServer(t, nil)
	redirects := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirects <- struct{}{}
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	ntStart(t, mb, Hook{Name: "web", URL: srv.URL, Secret: "k"})
	ntWrite(t, mb, ntMsg("C1_1700000000_000300", ""))
	for i := 0; i < 2; i++ { // the first call and a retry
		select {
		case <-redirects:
		case <-time.After(10 * time.Second):
			t.Fatal("the redirecting hook was not called (again)")
		}
	}
	ntNone(t, hit, 100*time.Millisecond)
}

func ntHMAC(secret string, ts int64, body []byte) string { return Sign(secret, ts, body) }

// A digest window makes one call of a burst, a JSON array in order.
func TestDigestCoalescesBurst(t *testing.T) {
	mb := ntMailbox(t)
	srv, calls := ntServer(t, nil)
	ntStart(t, mb, Hook{Name: "digest", URL: srv.URL, Secret: "k", Digest: 500 * time.Millisecond})
	var ids []string
	for i := 0; i < 5; i++ { // five commits, as five messages arriving apart
		m := ntMsg(fmt.Sprintf("C1_1700000000_00040%d", i), "")
		ids = append(ids, m.ID)
		ntWrite(t, mb, m)
	}
	c := ntNext(t, calls, "the digest")
	var got []schema.Message
	if err := json.Unmarshal(c.body, &got); err != nil {
		t.Fatalf("a digest's body is not a list: %v\n%s", err, c.body)
	}
	var gotIDs []string
	for _, m := range got {
		gotIDs = append(gotIDs, m.ID)
	}
	if !slices.Equal(gotIDs, ids) {
		t.Errorf("digest holds %v, want %v", gotIDs, ids)
	}
	ntNone(t, calls, 700*time.Millisecond)
}

// A failing call is retried with backoff until it succeeds; meanwhile the
// later events of its thread wait, and other threads go on.
func TestRetryInOrderPerThread(t *testing.T) {
	mb := ntMailbox(t)
	var mu sync.Mutex
	failsLeft := 3
	srv, calls := ntServer(t, func(c ntCall) int {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(string(c.body), `"id":"slack_C1_1700000000_000501"`) && failsLeft > 0 {
			failsLeft--
			return http.StatusServiceUnavailable
		}
		return 0
	})
	ntStart(t, mb, Hook{Name: "web", URL: srv.URL, Secret: "k", Concurrency: 4})
	a1, a2, b1 := ntMsg("C1_1700000000_000501", "T-A"), ntMsg("C1_1700000000_000502", "T-A"), ntMsg("C1_1700000000_000503", "T-B")
	ntWrite(t, mb, a1, a2, b1)
	var order []string
	for len(order) < 6 { // a1 three times failing, then a1, a2, b1
		c := ntNext(t, calls, fmt.Sprintf("call %d (so far %v)", len(order)+1, order))
		var m schema.Message
		json.Unmarshal(c.body, &m)
		order = append(order, m.ID)
	}
	ntNone(t, calls, 200*time.Millisecond)
	count := map[string]int{}
	for _, id := range order {
		count[id]++
	}
	if count[a1.ID] != 4 || count[a2.ID] != 1 || count[b1.ID] != 1 {
		t.Fatalf("calls %v", order)
	}
	if slices.Index(order, a2.ID) < slices.Index(order, a1.ID)+3 {
		t.Errorf("a2 ran before a1 succeeded: %v", order)
	}
	if slices.Index(order, b1.ID) > 3 {
		t.Errorf("b1, of another thread, waited for a1's retries: %v", order)
	}
	var left int
	mb.DB().QueryRow(`SELECT COUNT(*) FROM notify_queue`).Scan(&left)
	if left != 0 {
		t.Errorf("%d queue rows left", left)
	}
}

// Filters: provider, correlation glob, mentions, personal_eligible.
func TestFilters(t *testing.T) {
	mb := ntMailbox(t)
	srv, calls := ntServer(t, nil)
	yes := true
	ntStart(t, mb,
		Hook{Name: "email-only", URL: srv.URL + "/email", Secret: "k", Providers: []schema.Provider{schema.Email}},
		Hook{Name: "bugs", URL: srv.URL + "/bugs", Secret: "k", Correlation: "bug_*"},
		Hook{Name: "any-corr", URL: srv.URL + "/any", Secret: "k", Correlation: "*"},
		Hook{Name: "mention", URL: srv.URL + "/mention", Secret: "k", Mentions: []string{"U0BOT"}},
		Hook{Name: "personal", URL: srv.URL + "/personal", Secret: "k", PersonalEligible: &yes},
	)
	plain := ntMsg("C1_1700000000_000601", "")
	bug := ntMsg("C1_1700000000_000602", "")
	bug.CorrelationID = "bug_12"
	other := ntMsg("C1_1700000000_000603", "")
	other.CorrelationID = "incident_3"
	ment := ntMsg("C1_1700000000_000604", "")
	ment.Participants.Mentions = []schema.Mention{{Type: schema.MentionUser, Target: "U0BOT", Name: "bot"}}
	mentOther := ntMsg("C1_1700000000_000605", "")
	mentOther.Participants.Mentions = []schema.Mention{{Type: schema.MentionUser, Target: "U0ANN", Name: "ann"}}
	pers := ntMsg("C1_1700000000_000606", "")
	pers.Metadata.Extra.PersonalEligible = &yes
	mail := testutil.Message(schema.Email, "x1", time.Now(), "mail")
	ntWrite(t, mb, plain, bug, other, ment, mentOther, pers, mail)
	got := map[string][]string{}
	for i := 0; i < 6; i++ {
		c := ntNext(t, calls, fmt.Sprintf("call %d (so far %v)", i+1, got))
		var m schema.Message
		json.Unmarshal(c.body, &m)
		h := c.header.Get("X-Courier-Hook")
		got[h] = append(got[h], m.ID)
	}
	ntNone(t, calls, 200*time.Millisecond)
	want := map[string][]string{
		"email-only": {mail.ID}, "bugs": {bug.ID}, "any-corr": {bug.ID, other.ID}, "mention": {ment.ID}, "personal": {pers.ID},
	}
	for h, ids := range want {
		if !slices.Equal(got[h], ids) {
			t.Errorf("%s got %v, want %v", h, got[h], ids)
		}
	}
}

// Drafts delivered and dead-lettered fire their events, with the draft
// (and its delivery block) as the JSON.
func TestDraftEvents(t *testing.T) {
	mb := ntMailbox(t)
	srv, calls := ntServer(t, nil)
	ntStart(t, mb, Hook{Name: "drafts", URL: srv.URL, Secret: "k", On: []mailbox.EventKind{mailbox.EventDelivered, mailbox.EventDead}})
	ctx := context.Background()
	for i, box := range []mailbox.Box{mailbox.BoxArchive, mailbox.BoxDeadletter} {
		d := &schema.Draft{ID: fmt.Sprintf("slack_out_%032x", i), Provider: schema.Slack, To: schema.Recipients{"C1"}, CreatedAt: schema.TimePtr(time.Now()),
			ThreadKey: "1700000000.000100", Body: "on it\n"}
		rel, err := mb.Queue(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		status := schema.DeliverySent
		if box == mailbox.BoxDeadletter {
			status = schema.DeliveryFailed
		}
		d.Delivery = &schema.Delivery{Status: status, Attempts: 1, Reason: "channel_not_found"}
		if _, err := mb.FinishDelivery(ctx, d, rel, box); err != nil {
			t.Fatal(err)
		}
		c := ntNext(t, calls, "the draft's event")
		wantEvent := map[mailbox.Box]string{mailbox.BoxArchive: "delivered", mailbox.BoxDeadletter: "dead"}[box]
		if c.header.Get("X-Courier-Event") != wantEvent {
			t.Errorf("event %q, want %q", c.header.Get("X-Courier-Event"), wantEvent)
		}
		var got schema.Draft
		if err := json.Unmarshal(c.body, &got); err != nil || got.ID != d.ID || got.Delivery == nil || got.Delivery.Status != status {
			t.Errorf("body %s (%v)", c.body, err)
		}
	}
	// Inbound mail does not reach a hook on drafts only.
	ntWrite(t, mb, ntMsg("C1_1700000000_000701", ""))
	ntNone(t, calls, 200*time.Millisecond)
}

// An inbound event that could not become a message fires dead too, with
// what the dead letter says as the JSON and its payload's path; a hook
// on one provider gets its provider's only, and a hook on inbound mail
// none.
func TestDeadLetterEvents(t *testing.T) {
	mb := ntMailbox(t)
	srv, calls := ntServer(t, nil)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "done")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ntStart(t, mb,
		Hook{Name: "dead", URL: srv.URL, Secret: "k", On: []mailbox.EventKind{mailbox.EventDead}, Providers: []schema.Provider{schema.Slack}},
		Hook{Name: "inbound", URL: srv.URL, Secret: "k"},
		Hook{Name: "exec", Exec: []string{`env > "$OUT/env"; cat > "$OUT/stdin"; echo ok > "$FIFO"`}, Shell: true,
			Env: map[string]string{"OUT": dir, "FIFO": fifo}, On: []mailbox.EventKind{mailbox.EventDead}, Providers: []schema.Provider{schema.Slack}})
	dl := mailbox.NewDeadLetters(mb, mailbox.DeadLetterLimits{})
	ctx := context.Background()
	if _, _, err := dl.Put(ctx, mailbox.RawDeadLetter{Provider: schema.Lark, Reason: "lark's", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	rel, _, err := dl.Put(ctx, mailbox.RawDeadLetter{Provider: schema.Slack, Source: "slack socket mode, event Ev9", Reason: "slack: a message event without a ts", Payload: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	c := ntNext(t, calls, "the dead letter's event")
	var got mailbox.DeadLetterInfo
	if err := json.Unmarshal(c.body, &got); err != nil || got.Path != rel || got.Provider != schema.Slack ||
		got.Reason != "slack: a message event without a ts" || got.Source != "slack socket mode, event Ev9" || got.Size != 7 {
		t.Errorf("body %s (%v)", c.body, err)
	}
	if c.header.Get("X-Courier-Event") != "dead" || c.header.Get("X-Courier-Hook") != "dead" {
		t.Errorf("headers %v", c.header)
	}
	ntNone(t, calls, 300*time.Millisecond)

	env := ntHookEnv(t, fifo, filepath.Join(dir, "env"))
	for k, v := range map[string]string{"COURIER_EVENT": "dead", "COURIER_MESSAGE_ID": got.ID, "COURIER_PROVIDER": "slack",
		"COURIER_MESSAGE_PATH": filepath.Join(mb.Root, rel), "COURIER_THREAD_KEY": "", "COURIER_COUNT": "1"} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "stdin")); !strings.Contains(string(b), `"reason":"slack: a message event without a ts"`) {
		t.Errorf("stdin %s", b)
	}
}

// A hook stopped mid-call (the service stopping, or dying) runs again at
// the next start; an event journaled while no runner ran runs too; a new
// hook does not run for the past.
func TestQueueSurvivesRestart(t *testing.T) {
	mb := ntMailbox(t)
	block := make(chan struct{})
	started := make(chan string, 10)
	var blocking sync.Mutex
	blocking.Lock()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m schema.Message
		json.NewDecoder(r.Body).Decode(&m)
		started <- m.ID
		select {
		case <-block:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	r := New(mb, &Options{Hooks: []Hook{{Name: "web", URL: srv.URL, Secret: "k"}}, Root: mb.Root})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	m1 := ntMsg("C1_1700000000_000801", "T")
	m2 := ntMsg("C1_1700000000_000802", "T") // waits behind m1, in its thread
	ntWrite(t, mb, m1, m2)
	if id := <-started; id != m1.ID {
		t.Fatalf("first call for %s", id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: the call in flight is cut
	if err := r.Stop(ctx); err == nil {
		t.Error("Stop with a call cut short said nothing")
	}
	m3 := ntMsg("C1_1700000000_000803", "U") // journaled while nothing runs
	ntWrite(t, mb, m3)

	srv2, calls := ntServer(t, nil)
	ntStart(t, mb, Hook{Name: "web", URL: srv2.URL, Secret: "k"}, Hook{Name: "new", URL: srv2.URL + "/new", Secret: "k"})
	got := map[string]int{}
	var order []string
	for i := 0; i < 3; i++ {
		c := ntNext(t, calls, "the calls left from before the restart")
		var m schema.Message
		json.Unmarshal(c.body, &m)
		if c.header.Get("X-Courier-Hook") != "web" {
			t.Errorf("hook %s, added after the events, ran for %s", c.header.Get("X-Courier-Hook"), m.ID)
		}
		got[m.ID]++
		order = append(order, m.ID)
	}
	ntNone(t, calls, 200*time.Millisecond)
	if got[m1.ID] != 1 || got[m2.ID] != 1 || got[m3.ID] != 1 {
		t.Errorf("after the restart: %v", got)
	}
	if slices.Index(order, m2.ID) < slices.Index(order, m1.ID) {
		t.Errorf("out of order in the thread: %v", order)
	}
}

// Past max_queue, events wait in the journal, not dropped: once the queue
// drains, they run.
func TestQueueBoundLosesNothing(t *testing.T) {
	mb := ntMailbox(t)
	release := make(chan struct{})
	var once sync.Once
	srv, calls := ntServer(t, func(c ntCall) int {
		<-release
		return 0
	})
	ntStart(t, mb, Hook{Name: "web", URL: srv.URL, Secret: "k", MaxQueue: 2, Concurrency: 1})
	var msgs []*schema.Message
	for i := 0; i < 6; i++ {
		msgs = append(msgs, ntMsg(fmt.Sprintf("C1_1700000000_0009%02d", i), "T"))
	}
	ntWrite(t, mb, msgs...)
	ntNext(t, calls, "the first call")
	var queued int
	mb.DB().QueryRow(`SELECT COUNT(*) FROM notify_queue`).Scan(&queued)
	if queued > 2 {
		t.Errorf("%d rows queued past max_queue 2", queued)
	}
	once.Do(func() { close(release) })
	seen := 1
	for seen < 6 {
		ntNext(t, calls, fmt.Sprintf("call %d of 6", seen+1))
		seen++
	}
	ntNone(t, calls, 200*time.Millisecond)
}

func TestLimiter(t *testing.T) {
	l := limiter{calls: 2, per: time.Minute}
	t0 := time.Unix(1000, 0)
	if _, ok := l.take(t0); !ok {
		t.Fatal("first call refused")
	}
	if _, ok := l.take(t0.Add(time.Second)); !ok {
		t.Fatal("second call refused")
	}
	at, ok := l.take(t0.Add(2 * time.Second))
	if ok || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("third call: %v %v, want refused until %v", at, ok, t0.Add(time.Minute))
	}
	if _, ok := l.take(t0.Add(time.Minute)); !ok {
		t.Fatal("a call once the window moved refused")
	}
}

// ntLog is a logger whose output the test reads once the runner stopped.
type ntLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *ntLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *ntLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// An exec hook that outlives its timeout is killed with what it started
// (its process group), and run again; what it prints reaches the log cut
// to max_output.
func TestExecTimeoutRetriedOutputBounded(t *testing.T) {
	mb := ntMailbox(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ran")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	rf, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	lines := bufio.NewScanner(rf)
	// The first run prints 100 KB, starts a child that would outlive it,
	// and hangs; the second says it ran. The timeout leaves the first run
	// time to get to its hang on a loaded machine (at 500 ms it was killed
	// before it said "hung", once, in a .ci/run at load 11).
	script := `if [ ! -e "$D/first" ]; then touch "$D/first"; head -c 100000 /dev/zero | tr '\0' x; sleep 300 & echo $! > "$D/child"; echo "hung" > "$D/ran"; sleep 300; fi; echo "ran" > "$D/ran"`
	var log ntLog
	r := New(mb, &Options{Hooks: []Hook{{Name: "slow", Exec: []string{script}, Shell: true, Env: map[string]string{"D": dir}, Timeout: 3 * time.Second, MaxOutput: 1000}},
		Root: mb.Root, BackoffBase: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ntWrite(t, mb, ntMsg("C1_1700000000_001001", ""))
	for _, want := range []string{"hung", "ran"} {
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("hook said %q, want %q", lines.Text(), want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "child"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Fatalf("child pid %q", b)
	}
	// Killed, it may stay a zombie until its new parent reaps it.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(st), ") Z ") {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the hook's child outlived its timeout: %s", st)
	}
	out := log.String()
	if !strings.Contains(out, "timed out after 3s") {
		t.Errorf("the log does not say the hook timed out:\n%s", out)
	}
	if strings.Contains(out, strings.Repeat("x", 1001)) || !strings.Contains(out, strings.Repeat("x", 1000)) || !strings.Contains(out, "dropped_bytes=99000") {
		t.Errorf("output not kept to 1000 bytes: %d bytes of log: %.600s", len(out), out)
	}
}

// An event whose file is gone by the time the runner reads it runs no
// hook and holds nothing up: the events after it run.
func TestEventOfGoneFileSkipped(t *testing.T) {
	mb := ntMailbox(t)
	srv, calls := ntServer(t, nil)
	hook := Hook{Name: "web", URL: srv.URL, Secret: "k"}
	r := New(mb, &Options{Hooks: []Hook{hook}, Root: mb.Root})
	if err := r.Start(context.Background()); err != nil { // the hook's position: the journal's start
		t.Fatal(err)
	}
	r.Stop(context.Background())
	gone, kept := ntMsg("C1_1700000000_001101", "T"), ntMsg("C1_1700000000_001102", "T")
	ntWrite(t, mb, gone, kept)
	e, err := mb.Get(context.Background(), gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(mb.Root, e.Path))
	if err := mb.Forget(context.Background(), gone.ID); err != nil {
		t.Fatal(err)
	}
	ntStart(t, mb, hook)
	c := ntNext(t, calls, "the call for the message still there")
	var m schema.Message
	if err := json.Unmarshal(c.body, &m); err != nil || m.ID != kept.ID {
		t.Errorf("called for %s (%v)", c.body, err)
	}
	ntNone(t, calls, 200*time.Millisecond)
}

// A rate limit makes calls over it wait for the window, none dropped.
func TestRateLimitWaits(t *testing.T) {
	mb := ntMailbox(t)
	srv, calls := ntServer(t, nil)
	// The limiter holds the third call's start until per after the
	// first's; the test sees arrivals, which a loaded machine may delay
	// by tens of milliseconds (the first more than the third: 359 ms for
	// 400 ms at load 10), hence a long period and a quarter of it to spare.
	const per = 1500 * time.Millisecond
	ntStart(t, mb, Hook{Name: "web", URL: srv.URL, Secret: "k", RateCalls: 2, RatePer: per, Concurrency: 4})
	var msgs []*schema.Message
	for i := 0; i < 4; i++ { // four threads: only the rate holds them
		msgs = append(msgs, ntMsg(fmt.Sprintf("C1_1700000000_0012%02d", i), fmt.Sprint("T", i)))
	}
	ntWrite(t, mb, msgs...)
	var at []time.Time
	for i := 0; i < 4; i++ {
		ntNext(t, calls, fmt.Sprintf("call %d of 4", i+1))
		at = append(at, time.Now())
	}
	ntNone(t, calls, 100*time.Millisecond)
	if gap := at[2].Sub(at[0]); gap < per*3/4 {
		t.Errorf("the third call came %v after the first; the rate is 2 per %v", gap, per)
	}
}

// A digest exec hook's environment: COURIER_COUNT and COURIER_MESSAGE_IDS
// cover the call, the single-message variables are the newest's; stdin
// is a JSON list. Email mentions: one of our addresses in To.
func TestExecDigestEnvironment(t *testing.T) {
	mb := ntMailbox(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "done")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	rf, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	script := `env > "$D/env"; cat > "$D/stdin"; echo ok > "$D/done"`
	ntStart(t, mb, Hook{Name: "digest", Exec: []string{script}, Shell: true, Env: map[string]string{"D": dir}, Digest: 300 * time.Millisecond,
		Mentions: []string{"Agent@Corp.example"}})
	var ids []string
	for i := 0; i < 3; i++ {
		m := testutil.Message(schema.Email, fmt.Sprintf("d%d", i), time.Now(), "mail")
		m.Participants.To = []schema.Participant{{ID: "agent@corp.example", Name: "Agent", Email: "agent@corp.example"}}
		ids = append(ids, m.ID)
		ntWrite(t, mb, m)
	}
	other := testutil.Message(schema.Email, "d-cc-someone-else", time.Now(), "not to us")
	other.Participants.To = []schema.Participant{{ID: "bob@corp.example", Name: "Bob", Email: "bob@corp.example"}}
	ntWrite(t, mb, other)
	if !bufio.NewScanner(rf).Scan() {
		t.Fatal("no digest call")
	}
	env := map[string]string{}
	b, _ := os.ReadFile(filepath.Join(dir, "env"))
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	if env["COURIER_COUNT"] != "3" || env["COURIER_MESSAGE_IDS"] != strings.Join(ids, " ") || env["COURIER_MESSAGE_ID"] != ids[2] ||
		env["COURIER_THREAD_KEY"] != "email-thread:d2@example.com" || env["COURIER_EVENT"] != "inbound" {
		t.Errorf("digest environment: COUNT=%q IDS=%q ID=%q THREAD=%q", env["COURIER_COUNT"], env["COURIER_MESSAGE_IDS"], env["COURIER_MESSAGE_ID"], env["COURIER_THREAD_KEY"])
	}
	var list []schema.Message
	b, _ = os.ReadFile(filepath.Join(dir, "stdin"))
	if err := json.Unmarshal(b, &list); err != nil || len(list) != 3 || list[0].ID != ids[0] {
		t.Errorf("stdin of a digest: %.300s (%v)", b, err)
	}
}

// An exec hook that leaves a process of its own session behind, holding
// its output open, and exits 0 succeeded: its output is cut after a
// short grace and logged, and it is not run again (each run would start
// another process).
func TestExecBackgroundedProcessNotAFailure(t *testing.T) {
	mb := ntMailbox(t)
	dir := t.TempDir()
	script := `echo run >> "$D/runs"; setsid sh -c 'echo $$ >> "$D/bg"; exec sleep 120' & exit 0`
	var log ntLog
	r := New(mb, &Options{Hooks: []Hook{{Name: "daemon", Exec: []string{script}, Shell: true, Env: map[string]string{"D": dir}}},
		Root: mb.Root, BackoffBase: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile(filepath.Join(dir, "bg"))
		for _, f := range strings.Fields(string(b)) {
			if pid, _ := strconv.Atoi(f); pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	ntWrite(t, mb, ntMsg("C1_1700000000_001301", ""))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), "notify: hook ran") && !strings.Contains(log.String(), "hook failed") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a retry would have run by now
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	out := log.String()
	if runs, _ := os.ReadFile(filepath.Join(dir, "runs")); string(runs) != "run\n" {
		t.Errorf("the hook ran %d times, want once:\n%s", strings.Count(string(runs), "run"), out)
	}
	if strings.Contains(out, "hook failed") || !strings.Contains(out, "notify: hook ran") || !strings.Contains(out, "output cut") {
		t.Errorf("log:\n%s", out)
	}
	if n, err := mb.DB().QueryContext(context.Background(), `SELECT 1 FROM notify_queue`); err == nil {
		if n.Next() {
			t.Error("the call is still queued")
		}
		n.Close()
	}
}

// Attack (issue 18, item 9): a thread key holding control characters
// (from a sender's References, or any provider's) reaches an exec hook's
// COURIER_THREAD_KEY without them.
func TestExecHookEnvStripsControls(t *testing.T) {
	mb := ntMailbox(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "done")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ntStart(t, mb, Hook{Name: "wake", Exec: []string{`env > "$OUT/env"; echo ok > "$FIFO"`}, Shell: true, Env: map[string]string{"OUT": dir, "FIFO": fifo}})
	ntWrite(t, mb, ntMsg("C1_1700000000_001401", "email-thread:a\x01\x1b[31mb\u202e@evil"))
	env := ntHookEnv(t, fifo, filepath.Join(dir, "env"))
	if got, want := env["COURIER_THREAD_KEY"], "email-thread:a[31mb@evil"; got != want {
		t.Errorf("COURIER_THREAD_KEY = %q, want %q", got, want)
	}
}

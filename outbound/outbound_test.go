package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/outbound"
	"github.com/monoco/courier/schema"
)

var ctx = context.Background()

// recorder is a Sender that records calls and answers from a script.
type recorder struct {
	mu    sync.Mutex
	calls []call
	// answer decides the outcome of the n-th call (1-based) for a draft.
	answer func(d *schema.Draft, n int) (adapters.Receipt, error)
	sent   chan string
}

type call struct {
	id  string
	key string
	at  time.Time
}

func newRecorder(answer func(d *schema.Draft, n int) (adapters.Receipt, error)) *recorder {
	return &recorder{answer: answer, sent: make(chan string, 1000)}
}

func (r *recorder) Send(ctx context.Context, at *adapters.Attempt) (adapters.Receipt, error) {
	d := at.Draft
	r.mu.Lock()
	r.calls = append(r.calls, call{d.ID, d.IdempotencyKey, time.Now()})
	n := 0
	for _, c := range r.calls {
		if c.id == d.ID {
			n++
		}
	}
	r.mu.Unlock()
	rc := adapters.Receipt{ProviderMessageID: "pm-" + d.ID}
	var err error
	if r.answer != nil {
		rc, err = r.answer(d, n)
	}
	if err == nil {
		r.sent <- d.ID
	}
	return rc, err
}

func (r *recorder) callsFor(id string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.id == id {
			out = append(out, c)
		}
	}
	return out
}

type env struct {
	root string
	mb   *mailbox.Mailbox
	dz   *dropzone.Store
}

func setup(t *testing.T) *env {
	t.Helper()
	w := wstest.Mailbox(t)
	return &env{root: w.Root, mb: w.MB, dz: w.DZ}
}

func (e *env) start(t *testing.T, opts outbound.Options) *outbound.Engine {
	t.Helper()
	opts.Dropzone = e.dz
	if os.Getenv("COURIER_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.BackoffBase == 0 {
		opts.BackoffBase = 20 * time.Millisecond
	}
	eng := outbound.New(e.mb, &opts)
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(ctx) })
	return eng
}

var seq int

func (e *env) queue(t *testing.T, p schema.Provider, mutate ...func(*schema.Draft)) *schema.Draft {
	t.Helper()
	seq++
	d := &schema.Draft{
		ID: fmt.Sprintf("%s_out_%032x", p, seq), Provider: p, To: schema.Recipients{"oc_1"},
		CreatedAt: schema.TimePtr(time.Now()), IdempotencyKey: fmt.Sprintf("key-%d", seq), Body: "hello\n",
	}
	if p == schema.Email {
		d.To, d.Subject = schema.Recipients{"ann@example.com"}, "Hi"
	}
	for _, m := range mutate {
		m(d)
	}
	if _, err := e.mb.Queue(ctx, d); err != nil {
		t.Fatal(err)
	}
	return d
}

func (e *env) status(t *testing.T, id string) mailbox.Status {
	ent, err := e.mb.Get(ctx, id)
	if err != nil {
		return ""
	}
	return ent.Status
}

func (e *env) draftAt(t *testing.T, id string) (*schema.Draft, string) {
	t.Helper()
	ent, err := e.mb.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := e.mb.Draft(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return d, ent.Path
}

func files(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			r, _ := filepath.Rel(dir, p)
			out = append(out, r)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func TestDeliverAndArchive(t *testing.T) {
	e := setup(t)
	// Queued before the engine starts (the service was down).
	early := e.queue(t, schema.Lark)
	rec := newRecorder(nil)
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec}})
	// Queued while it runs: the watch picks it up.
	late := e.queue(t, schema.Lark)
	for _, d := range []*schema.Draft{early, late} {
		testutil.WaitFor(t, 10*time.Second, d.ID+" sent", func() bool { return e.status(t, d.ID) == mailbox.StatusSent })
		got, path := e.draftAt(t, d.ID)
		if !strings.HasPrefix(path, ".monoco/mailbox/archive/lark/") {
			t.Errorf("archived at %s", path)
		}
		dl := got.Delivery
		if dl == nil || dl.Status != "sent" || dl.Attempts != 1 || dl.SentAt == nil || dl.ProviderMessageID != "pm-"+d.ID {
			t.Errorf("delivery block = %+v", dl)
		}
		if got.IdempotencyKey != d.IdempotencyKey || got.Body != d.Body {
			t.Errorf("archived draft changed: %+v", got)
		}
	}
	if f := files(filepath.Join(e.root, ".monoco/mailbox/outbound")); len(f) != 0 {
		t.Errorf("outbound not empty: %v", f)
	}
}

func TestRetriesThenSuccess(t *testing.T) {
	e := setup(t)
	rec := newRecorder(func(d *schema.Draft, n int) (adapters.Receipt, error) {
		switch n {
		case 1:
			return adapters.Receipt{}, errors.New("connection reset") // unclassified: temporary
		case 2:
			return adapters.Receipt{}, adapters.TemporaryAfter(errors.New("429 rate limited"), 300*time.Millisecond)
		}
		return adapters.Receipt{ProviderMessageID: "ok"}, nil
	})
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Slack: rec}, BackoffBase: 40 * time.Millisecond})
	d := e.queue(t, schema.Slack)
	testutil.WaitFor(t, 10*time.Second, "sent", func() bool { return e.status(t, d.ID) == mailbox.StatusSent })
	calls := rec.callsFor(d.ID)
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3", len(calls))
	}
	if gap := calls[1].at.Sub(calls[0].at); gap < 20*time.Millisecond {
		t.Errorf("first retry after %v: no backoff (base 40 ms, jitter keeps at least half)", gap)
	}
	if gap := calls[2].at.Sub(calls[1].at); gap < 300*time.Millisecond {
		t.Errorf("Retry-After of 300 ms not honoured: retried after %v", gap)
	}
	for _, c := range calls {
		if c.key != d.IdempotencyKey {
			t.Errorf("attempt sent with key %q, want the key fixed at queue time %q", c.key, d.IdempotencyKey)
		}
	}
	got, _ := e.draftAt(t, d.ID)
	if got.Delivery.Attempts != 3 {
		t.Errorf("attempts = %d, want 3", got.Delivery.Attempts)
	}
}

func TestPermanentAndExhausted(t *testing.T) {
	e := setup(t)
	rec := newRecorder(func(d *schema.Draft, n int) (adapters.Receipt, error) {
		if d.To[0] == "bad" {
			return adapters.Receipt{}, adapters.Permanent(errors.New("550 5.1.1 no such user"))
		}
		return adapters.Receipt{}, adapters.Temporary(errors.New("451 try later"))
	})
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec}, MaxAttempts: 3, BackoffBase: 5 * time.Millisecond})
	bad := e.queue(t, schema.Lark, func(d *schema.Draft) { d.To = schema.Recipients{"bad"} })
	flaky := e.queue(t, schema.Lark)
	for _, d := range []*schema.Draft{bad, flaky} {
		testutil.WaitFor(t, 10*time.Second, d.ID+" dead", func() bool { return e.status(t, d.ID) == mailbox.StatusDead })
	}
	got, path := e.draftAt(t, bad.ID)
	if !strings.HasPrefix(path, ".monoco/mailbox/.deadletter/lark/") || got.Delivery.Status != "failed" ||
		got.Delivery.Attempts != 1 || !strings.Contains(string(got.Delivery.Reason), "550 5.1.1") {
		t.Errorf("permanent: %s %+v", path, got.Delivery)
	}
	got, _ = e.draftAt(t, flaky.ID)
	if got.Delivery.Attempts != 3 || !strings.Contains(string(got.Delivery.Reason), "gave up after 3 attempts: 451 try later") {
		t.Errorf("exhausted: %+v", got.Delivery)
	}
	if n := len(rec.callsFor(bad.ID)); n != 1 {
		t.Errorf("permanent failure tried %d times", n)
	}
}

func TestScheduleAndDisabledProvider(t *testing.T) {
	e := setup(t)
	rec := newRecorder(nil)
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec}})
	at := time.Now().Add(400 * time.Millisecond)
	later := e.queue(t, schema.Lark, func(d *schema.Draft) { d.Options.ScheduleAt = schema.TimePtr(at) })
	slack := e.queue(t, schema.Slack, func(d *schema.Draft) { d.To = schema.Recipients{"C0123456"} })
	id := <-rec.sent
	if id != later.ID {
		t.Fatalf("sent %s", id)
	}
	if c := rec.callsFor(later.ID); c[0].at.Before(at) {
		t.Errorf("scheduled draft sent at %v, before its schedule_at %v", c[0].at, at)
	}
	testutil.WaitFor(t, 10*time.Second, "archived", func() bool { return e.status(t, later.ID) == mailbox.StatusSent })
	got, _ := e.draftAt(t, later.ID)
	if got.Delivery.Attempts != 1 {
		t.Errorf("holding a draft counted as an attempt: %d", got.Delivery.Attempts)
	}
	st, err := e.mb.Outbound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Provider != schema.Slack || st[0].Queued != 1 {
		t.Errorf("outbound status = %+v, want the slack draft waiting", st)
	}
	if e.status(t, slack.ID) != mailbox.StatusQueued {
		t.Errorf("draft for a disabled provider: %s", e.status(t, slack.ID))
	}
}

// What cannot be sent is set aside with the reason, never deleted, and the
// rest of the queue goes on.
func TestBadInputSetAside(t *testing.T) {
	e := setup(t)
	rec := newRecorder(nil)
	outDir := filepath.Join(e.root, ".monoco/mailbox/outbound")
	dead := filepath.Join(e.root, ".monoco/mailbox/.deadletter")
	// Before start: a stray file, an unknown provider folder, a hand-made
	// draft without an id.
	os.WriteFile(filepath.Join(outDir, "lark", "notes.txt"), []byte("not a draft"), 0o644)
	os.MkdirAll(filepath.Join(outDir, "telegram"), 0o755)
	os.WriteFile(filepath.Join(outDir, "telegram", "20260101T000000_telegram_out_1.md"), []byte("---\nto: x\n---\nhi\n"), 0o644)
	os.WriteFile(filepath.Join(outDir, "lark", "20260101T000000_lark_out_hand.md"), []byte("---\nprovider: lark\nto: oc_1\n---\nhi\n"), 0o644)
	// A draft whose artifact is gone from the dropzone.
	orphan := e.queue(t, schema.Lark, func(d *schema.Draft) {
		d.Artifacts = []schema.DraftArtifact{{ID: "sha256:" + strings.Repeat("ab", 32), Name: "gone.pdf"}}
	})
	// A queued draft edited into an invalid one.
	edited := e.queue(t, schema.Lark)
	ent, _ := e.mb.Get(ctx, edited.ID)
	p := filepath.Join(e.root, ent.Path)
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("---\nprovider: lark\nto: [oops\n---\n"), 0o644)
	good := e.queue(t, schema.Lark)

	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec}})
	if id := <-rec.sent; id != good.ID {
		t.Fatalf("sent %s, want the good draft", id)
	}
	testutil.WaitFor(t, 10*time.Second, "good archived", func() bool { return e.status(t, good.ID) == mailbox.StatusSent })
	testutil.WaitFor(t, 10*time.Second, "orphan dead", func() bool { return e.status(t, orphan.ID) == mailbox.StatusDead })
	got, _ := e.draftAt(t, orphan.ID)
	if !strings.Contains(string(got.Delivery.Reason), "gone.pdf") || !strings.Contains(string(got.Delivery.Reason), "no longer in the dropzone") {
		t.Errorf("orphan reason: %q", got.Delivery.Reason)
	}
	want := map[string]string{
		"lark/notes.txt": "not a draft",
		"telegram/20260101T000000_telegram_out_1.md": "not a provider's folder",
		"lark/20260101T000000_lark_out_hand.md":      "not a valid queued draft",
		filepath.Join("lark", filepath.Base(p)):      "no longer valid",
	}
	for f, reason := range want {
		testutil.WaitFor(t, 10*time.Second, f+" set aside", func() bool { _, err := os.Stat(filepath.Join(dead, f)); return err == nil })
		note, err := os.ReadFile(filepath.Join(dead, f+".reason"))
		if err != nil || !strings.Contains(string(note), reason) {
			t.Errorf("%s.reason = %q, %v; want %q", f, note, err, reason)
		}
	}
	// Content kept byte for byte.
	if b, _ := os.ReadFile(filepath.Join(dead, "lark/notes.txt")); string(b) != "not a draft" {
		t.Errorf("set-aside file changed: %q", b)
	}
	// A finished draft is indexed before its queued file is removed (a
	// crash in between keeps the new copy), so the status can read dead a
	// moment before outbound/ is empty.
	if !testutil.Poll(10*time.Second, func() bool { return len(files(outDir)) == 0 }) {
		t.Errorf("outbound not empty: %v", files(outDir))
	}
	if len(rec.callsFor(orphan.ID))+len(rec.callsFor(edited.ID)) != 0 {
		t.Error("an unsendable draft was handed to the sender")
	}
}

// A claim left by a crash (state sending) is released at start, and the
// draft is sent again with its key.
func TestResumeAfterCrash(t *testing.T) {
	e := setup(t)
	d := e.queue(t, schema.Lark)
	if _, ok, err := e.mb.ClaimDelivery(ctx, d.ID, "dead-process", time.Now(), time.Hour); err != nil || !ok {
		t.Fatal(ok, err)
	}
	rec := newRecorder(nil)
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec}})
	testutil.WaitFor(t, 10*time.Second, "sent", func() bool { return e.status(t, d.ID) == mailbox.StatusSent })
	got, _ := e.draftAt(t, d.ID)
	if got.Delivery.Attempts != 2 {
		t.Errorf("attempts = %d, want 2 (the interrupted one counts)", got.Delivery.Attempts)
	}
}

// doneProbe is a context that tells when it is first asked for Done: an
// engine's Stop asks once it waits for the sends in flight, until its
// context ends.
type doneProbe struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func newDoneProbe(parent context.Context) *doneProbe {
	return &doneProbe{Context: parent, asked: make(chan struct{})}
}

func (p *doneProbe) Done() <-chan struct{} {
	p.once.Do(func() { close(p.asked) })
	return p.Context.Done()
}

// Stop lets a send in flight finish; past the grace it is cancelled and
// the draft stays queued for the next start.
func TestStopWaitsForInflight(t *testing.T) {
	e := setup(t)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	rec := newRecorder(func(d *schema.Draft, n int) (adapters.Receipt, error) { return adapters.Receipt{}, nil })
	slow := adapters.SenderFunc(func(ctx context.Context, at *adapters.Attempt) (adapters.Receipt, error) {
		started <- struct{}{}
		select {
		case <-release:
			return rec.Send(ctx, at)
		case <-ctx.Done():
			return adapters.Receipt{}, ctx.Err()
		}
	})
	eng := e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: slow}})
	d := e.queue(t, schema.Lark)
	<-started
	// The send is let go only once Stop waits for it, with its deadline.
	probe := newDoneProbe(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- eng.Stop(probe) }()
	select {
	case <-probe.asked:
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with a send in flight", err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with a send in flight", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if e.status(t, d.ID) != mailbox.StatusSent {
		t.Errorf("in-flight send did not finish before Stop returned: %s", e.status(t, d.ID))
	}

	// Past the grace: cancelled, still queued.
	d2 := e.queue(t, schema.Lark)
	release = make(chan struct{})
	eng2 := outbound.New(e.mb, &outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: slow}})
	if err := eng2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-started
	// The grace ends while Stop waits for the send, which never ends by
	// itself.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	probe = newDoneProbe(sctx)
	go func() { <-probe.asked; cancel() }()
	if err := eng2.Stop(probe); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop past its grace = %v; want it to say the send was cancelled", err)
	}
	if e.status(t, d2.ID) != mailbox.StatusQueued {
		t.Errorf("a cancelled send must leave the draft queued, got %s", e.status(t, d2.ID))
	}
}

// A draft dropped into outbound/ by hand with more recipients than
// MaxRecipients (to, cc and bcc together; default 50) is dead-lettered
// with the reason, never handed to the provider: a reply to a mail whose
// Reply-To lists 5,000 addresses would mail them all in one transaction.
func TestTooManyRecipientsDeadLettered(t *testing.T) {
	e := setup(t)
	rec := newRecorder(nil)
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Email: rec}})
	victims := make(schema.Recipients, 5000)
	for i := range victims {
		victims[i] = fmt.Sprintf("victim%d@victims.example", i)
	}
	big := e.queue(t, schema.Email, func(d *schema.Draft) { d.To = victims })
	// 50 is allowed: 40 in to and 10 in cc; one more in bcc is not.
	fifty := e.queue(t, schema.Email, func(d *schema.Draft) { d.To, d.Cc = victims[:40], victims[40:50] })
	over := e.queue(t, schema.Email, func(d *schema.Draft) { d.To, d.Cc, d.Bcc = victims[:40], victims[40:50], victims[50:51] })
	for _, d := range []*schema.Draft{big, over} {
		testutil.WaitFor(t, 10*time.Second, d.ID+" dead", func() bool { return e.status(t, d.ID) == mailbox.StatusDead })
	}
	testutil.WaitFor(t, 10*time.Second, fifty.ID+" sent", func() bool { return e.status(t, fifty.ID) == mailbox.StatusSent })
	got, path := e.draftAt(t, big.ID)
	if !strings.HasPrefix(path, ".monoco/mailbox/.deadletter/email/") || got.Delivery.Status != "failed" ||
		string(got.Delivery.Reason) != "to: 5000 recipients (to 5000), more than courier.outbound.max_recipients (50) allows" {
		t.Errorf("5,000 recipients: %s %+v", path, got.Delivery)
	}
	got, _ = e.draftAt(t, over.ID)
	if string(got.Delivery.Reason) != "to: 51 recipients (to 40, cc 10, bcc 1), more than courier.outbound.max_recipients (50) allows" {
		t.Errorf("51 recipients: %+v", got.Delivery)
	}
	if n := len(rec.callsFor(big.ID)) + len(rec.callsFor(over.ID)); n != 0 {
		t.Errorf("a draft past the bound was handed to the provider %d times", n)
	}
}

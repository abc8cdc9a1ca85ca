package service

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/mailbox"
)

// TestLifetimeOrderAndRollback: components start in order and stop in
// reverse; a failed start stops, in reverse, only those already started,
// and its error names the component; Stop asks every component even when
// one fails.
func TestLifetimeOrderAndRollback(t *testing.T) {
	var log []string
	comp := func(name string, startErr, stopErr error) Component {
		return Component{Name: name,
			Start: func(context.Context) error { log = append(log, "start "+name); return startErr },
			Stop:  func(context.Context) error { log = append(log, "stop "+name); return stopErr },
		}
	}
	l := NewLifetime(nil)
	l.Add(comp("a", nil, nil))
	l.Add(comp("b", nil, errors.New("b would not stop")))
	l.Add(comp("c", nil, nil))
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := l.Stop(context.Background())
	if want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}; !reflect.DeepEqual(log, want) {
		t.Errorf("order %v, want %v", log, want)
	}
	if err == nil || !strings.Contains(err.Error(), "b: b would not stop") {
		t.Errorf("stop error %v, want b's", err)
	}

	log = nil
	l = NewLifetime(nil)
	l.Add(comp("http", nil, nil))
	l.Add(comp("ingest", nil, nil))
	l.Add(comp("receiver", errors.New("address in use"), nil))
	l.Add(comp("never", nil, nil))
	err = l.Start(context.Background())
	if err == nil || err.Error() != "receiver: address in use" {
		t.Errorf("start error %v", err)
	}
	if want := []string{"start http", "start ingest", "start receiver", "stop ingest", "stop http"}; !reflect.DeepEqual(log, want) {
		t.Errorf("rollback %v, want %v", log, want)
	}
	log = nil
	if err := l.Stop(context.Background()); err != nil || len(log) != 0 {
		t.Errorf("Stop after a rolled-back start: %v %v (nothing is left to stop)", err, log)
	}
}

// testMailbox is a new mailbox, closed when the test ends.
func testMailbox(t *testing.T) *mailbox.Mailbox {
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

type fixedHealth adapters.Health

func (h fixedHealth) Health() adapters.Health { return adapters.Health(h) }

// TestHealthReport: /health lists every adapter (disabled ones too), is
// degraded when an enabled adapter is not connected, and says when the
// service is stopping.
func TestHealthReport(t *testing.T) {
	mb := testMailbox(t)
	s := &Service{Mailbox: mb, Adapters: map[string]adapters.HealthReporter{
		"email": fixedHealth{Status: adapters.StatusConnected},
	}}
	get := func() Report {
		rec := httptest.NewRecorder()
		s.Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
		body, _ := io.ReadAll(rec.Body)
		var r Report
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("/health: %v: %s", err, body)
		}
		return r
	}
	r := get()
	if r.Status != "healthy" || r.Service != "running" || r.Adapters["email"].Status != adapters.StatusConnected ||
		r.Adapters["lark"].Status != adapters.StatusDisabled || r.Adapters["slack"].Status != adapters.StatusDisabled {
		t.Errorf("report %+v", r)
	}
	s.Adapters["email"] = fixedHealth{Status: "reconnecting", LastError: "connection refused"}
	if r := get(); r.Status != "degraded" || r.Adapters["email"].LastError != "connection refused" {
		t.Errorf("an adapter down: %+v", r)
	}
	s.MarkStopping()
	if r := get(); r.Service != "stopping" {
		t.Errorf("stopping: %+v", r)
	}
}

// TestHealthReportRefused: a provider whose Source waits to be started
// again (its credentials refused) says when on /health (retry_at, the
// earliest of its Sources), and no credential of a provider shows in an
// adapter's error or detail, whatever a server quoted back.
func TestHealthReportRefused(t *testing.T) {
	mb := testMailbox(t)
	const token = "xoxb-0000-sekrit-token"
	s := &Service{Mailbox: mb, Adapters: map[string]adapters.HealthReporter{
		"slack": fixedHealth{Status: adapters.StatusError, LastError: "slack: auth.test: invalid_auth for " + token, Detail: "token " + token},
		"email": fixedHealth{Status: adapters.StatusConnected},
	}}
	s.secrets.Add(confkit.Secret(token))
	at := time.Date(2026, 3, 1, 0, 2, 0, 0, time.UTC)
	waiting, running := &sourceRun{retryAt: at.Add(time.Minute)}, &sourceRun{}
	first := &sourceRun{retryAt: at}
	s.lanes = map[string]*lane{"slack": {runs: []*sourceRun{waiting, running, first}}, "email": {runs: []*sourceRun{{}}}}
	r := s.Report(context.Background())
	h := r.Adapters["slack"]
	if r.Status != "degraded" || h.RetryAt == nil || !h.RetryAt.Equal(at) || r.Adapters["email"].RetryAt != nil {
		t.Errorf("report %q, slack %+v, email %+v", r.Status, h, r.Adapters["email"])
	}
	if b, _ := json.Marshal(r); strings.Contains(string(b), token) || !strings.Contains(h.LastError, "invalid_auth for [redacted]") {
		t.Errorf("a token on /health: %s", b)
	}
}

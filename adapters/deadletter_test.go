package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/monoco/courier/schema"
)

// ScrubPayload takes out of a payload kept as a dead letter every secret
// it may carry: Slack's verification token and action tokens, Lark's
// header token and encrypt key, anything that looks like a Slack token
// wherever it is (a message's text included), at any depth; the rest is
// kept, numbers with all their digits.
func TestScrubPayload(t *testing.T) {
	in := `{"token":"verification-token","team_id":"T111","event_id":"Ev111","event_time":1665102362,
	 "big":12345678901234567890,"event":{"type":"message","text":"my token is xoxb-1234-5678-abcdEFGH, the app's xapp-1-A0-99-ff and xoxe.xoxp-1-Mi0",
	 "assistant_thread":{"action_token":"10116779555154.10138525474272.9b39d433"},"blocks":[{"bot_access_token":"t"}]},
	 "header":{"token":"lark-verification","app_secret":"s3","encrypt_key":"k3","tenant_key":"tk"},
	 "html":"<b>&</b>"}`
	out := string(ScrubPayload([]byte(in)))
	for _, secret := range []string{"verification-token", "xoxb-", "xapp-", "xoxe", "9b39d433", "bot_access_token", "lark-verification", `"s3"`, `"k3"`, "abcdEFGH"} {
		if strings.Contains(out, secret) {
			t.Errorf("%s left in\n%s", secret, out)
		}
	}
	for _, kept := range []string{`"event_id": "Ev111"`, `"event_time": 1665102362`, `"big": 12345678901234567890`, `"tenant_key": "tk"`,
		`my token is [scrubbed], the app's [scrubbed] and [scrubbed]`, `"html": "<b>&</b>"`} {
		if !strings.Contains(out, kept) {
			t.Errorf("%s missing from\n%s", kept, out)
		}
	}
	if !json.Valid([]byte(out)) {
		t.Errorf("not JSON any more:\n%s", out)
	}
	// Not JSON (a mail, a body that did not parse): the tokens only.
	raw := "Subject: hi\r\n\r\nuse xoxp-99-88-77 please\r\n"
	if got := string(ScrubPayload([]byte(raw))); got != "Subject: hi\r\n\r\nuse [scrubbed] please\r\n" {
		t.Errorf("a mail: %q", got)
	}
}

// Undeliverable carries its reason through wrapping; other errors have
// none.
func TestUndeliverable(t *testing.T) {
	err := fmt.Errorf("normalize: %w", Undeliverable("slack: a message event without a ts"))
	if r, ok := UndeliverableReason(err); !ok || r != "slack: a message event without a ts" {
		t.Errorf("%q %v", r, ok)
	}
	for _, e := range []error{nil, errors.New("x"), Temporary(errors.New("y"))} {
		if _, ok := UndeliverableReason(e); ok {
			t.Errorf("%v is not Undeliverable", e)
		}
	}
}

// Ignored counts by reason, concurrently; a nil one counts nothing.
func TestIgnored(t *testing.T) {
	var c Ignored
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { c.Add("notice"); c.Add("bot") })
	}
	wg.Wait()
	if got := c.Counts(); got["notice"] != 50 || got["bot"] != 50 || len(got) != 2 {
		t.Errorf("%v", got)
	}
	var none *Ignored
	none.Add("x")
	if none.Counts() != nil {
		t.Error("a nil Ignored counted")
	}
}

type plainSink struct{ Sink }

type keepingSink struct {
	plainSink
	kept []DeadLetter
}

func (s *keepingSink) SetAside(_ context.Context, d DeadLetter) error {
	s.kept = append(s.kept, d)
	return nil
}

// SetAside goes to a Sink that keeps dead letters, and is a log line for
// one that does not (a test's, a tool's).
func TestSetAside(t *testing.T) {
	d := DeadLetter{Provider: schema.Slack, Source: "slack events api", Reason: "no ts", Payload: []byte(`{}`)}
	ks := &keepingSink{}
	if err := SetAside(context.Background(), ks, nil, d); err != nil || len(ks.kept) != 1 || ks.kept[0].Reason != "no ts" {
		t.Errorf("%v %+v", err, ks.kept)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if err := SetAside(context.Background(), plainSink{}, log, d); err != nil || !strings.Contains(buf.String(), "nothing written") || !strings.Contains(buf.String(), "no ts") {
		t.Errorf("%v %q", err, buf.String())
	}
}

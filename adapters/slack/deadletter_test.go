package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// boltMessageChanged is the event of bolt-python's own test of an edit
// (tests/scenario_tests/test_message_changed.py, slackapi/bolt-python at
// 9c7c990, MIT): its message has no ts; the message edited is named by
// previous_message.ts only.
const boltMessageChanged = `{
  "token": "verification-token", "team_id": "T111", "enterprise_id": "E111", "api_app_id": "A111",
  "event": {
    "type": "message", "subtype": "message_changed",
    "message": {
      "type": "message", "text": "updated message", "user": "U111", "team": "T111",
      "edited": {"user": "U111", "ts": "1665102362.000000"},
      "blocks": [{"type": "rich_text", "block_id": "xwvU3", "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": "updated message"}]}]}]
    },
    "previous_message": {
      "type": "message", "text": "original message", "user": "U222", "team": "T111", "ts": "1665102338.901939",
      "blocks": [{"type": "rich_text", "block_id": "URf", "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": "original message"}]}]}]
    },
    "channel": "C111", "hidden": true, "ts": "1665102362.013600", "event_ts": "1665102362.013600", "channel_type": "channel"
  },
  "type": "event_callback", "event_id": "Ev111", "event_time": 1665102362,
  "authorizations": [{"enterprise_id": "E111", "team_id": "T111", "user_id": "U111", "is_bot": true, "is_enterprise_install": false}],
  "is_ext_shared_channel": false, "event_context": "1-message-T111-C111"
}`

// An edit whose message carries no ts is an edit of previous_message.ts
// (it was filed as a new message of its own, editing nothing), in that
// message's place: a reply's edit stays in its thread, from the edited
// message's thread_ts, else the previous message's.
func TestEditTargetFromPreviousMessage(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	var env envelope
	if err := json.Unmarshal([]byte(boltMessageChanged), &env); err != nil {
		t.Fatal(err)
	}
	ev, err := a.normalize(context.Background(), event{ID: env.EventID, Inner: env.Event})
	if err != nil || ev == nil || ev.Message == nil {
		t.Fatalf("%+v, %v", ev, err)
	}
	m := ev.Message
	if m.ID != "slack_C111_1665102362_013600" || m.Metadata.Extra.Edits != "slack_C111_1665102338_901939" {
		t.Errorf("id %s edits %q; want slack_C111_1665102362_013600 editing slack_C111_1665102338_901939", m.ID, m.Metadata.Extra.Edits)
	}
	if !strings.Contains(m.Body, "updated message") || ev.Debounce || m.Participants.From.ID != "U111" || m.Session.ThreadKey != "" {
		t.Errorf("body %q, debounce %v, from %q, thread %q", m.Body, ev.Debounce, m.Participants.From.ID, m.Session.ThreadKey)
	}
	testutil.CheckMessage(t, "bolt message_changed", m)

	// The same in a thread: the edit's thread is its message's.
	inner := `{"type":"message","subtype":"message_changed","channel":"C0GEN0001","ts":"1700000300.000009",
		"message":{"type":"message","user":"U0ANN0001","text":"fixed typo"},
		"previous_message":{"type":"message","user":"U0ANN0001","text":"fixed tpyo","ts":"1700000300.000002","thread_ts":"1700000300.000001"}}`
	ev, err = a.normalize(context.Background(), event{ID: "EvTH", Inner: json.RawMessage(inner)})
	if err != nil || ev == nil {
		t.Fatalf("%+v, %v", ev, err)
	}
	if m := ev.Message; m.Metadata.Extra.Edits != "slack_C0GEN0001_1700000300_000002" || m.Session.ThreadKey != "1700000300.000001" {
		t.Errorf("in a thread: edits %q, thread %q", m.Metadata.Extra.Edits, m.Session.ThreadKey)
	}
}

// Events that cannot be placed, posted to the Events API: each is
// answered 200 (a retry would not mend it) and set aside as a dead letter
// (the request body as received, the verification token and anything
// that looks like a token scrubbed, the signing secret too) with a reason
// naming what is wrong; no message file, no checkpoint; Slack's retry of
// one keeps no second copy. A deletion is placed by deleted_ts, an edit
// by previous_message.ts.
func TestDeadLetterWebhook(t *testing.T) {
	w := newInWorld(t, "events")
	h := w.r.webhook(w.sink)
	bad := map[string]struct{ inner, reason string }{
		"EvNOCH": {`{"type":"message","user":"U0ANN","text":"my token is xoxb-123-456-abcdef and ` + inSecret + `","ts":"1700000600.000100"}`,
			"slack: the event (message) has no channel: it cannot be placed"},
		"EvNOTS":   {`{"type":"message","channel":"C0DEAD001","user":"U0ANN","text":"when?"}`, "slack: the event (message) has no ts: it cannot be placed"},
		"EvNONE":   {`{"type":"app_mention","user":"U0ANN","text":"where?"}`, "slack: the event (app_mention) has no channel and no ts: it cannot be placed"},
		"EvCHNUM":  {`{"type":"message","channel":12345,"user":"U0ANN","text":"odd","ts":"1700000600.000200"}`, "slack: the event (message) has no channel: it cannot be placed"},
		"EvNOMSG":  {`{"type":"message","subtype":"message_changed","channel":"C0DEAD001","ts":"1700000600.000300"}`, "slack: a message_changed event without its message"},
		"EvNOPREV": {`{"type":"message","subtype":"message_changed","channel":"C0DEAD001","ts":"1700000600.000400","message":{"type":"message","user":"U0ANN","text":"edited"}}`, "slack: a message_changed event that names no message (no message.ts, no previous_message.ts)"},
		"EvNODEL":  {`{"type":"message","subtype":"message_deleted","channel":"C0DEAD001","ts":"1700000600.000500","hidden":true}`, "slack: a message_deleted event that names no message (no deleted_ts, no previous_message.ts)"},
	}
	for id, b := range bad {
		body := callback(id, json.RawMessage(b.inner))
		if code, resp := post(t, h, http.MethodPost, sign(inSecret, time.Now(), body), body); code != http.StatusOK {
			t.Errorf("%s: %d %q, want 200", id, code, resp)
		}
		hdr := sign(inSecret, time.Now(), body)
		hdr.Set("X-Slack-Retry-Num", "1")
		if code, _ := post(t, h, http.MethodPost, hdr, body); code != http.StatusOK {
			t.Errorf("%s: retry %d, want 200", id, code)
		}
	}
	// Placed: a deletion by deleted_ts, an edit by previous_message.ts.
	for id, inner := range map[string]string{
		"EvDEL":  `{"type":"message","subtype":"message_deleted","channel":"C0DEAD001","ts":"1700000601.000100","deleted_ts":"1700000500.000100","hidden":true}`,
		"EvEDIT": `{"type":"message","subtype":"message_changed","channel":"C0DEAD001","ts":"1700000601.000200","message":{"type":"message","user":"U0ANN","text":"new"},"previous_message":{"type":"message","user":"U0ANN","text":"old","ts":"1700000500.000200"}}`,
	} {
		body := callback(id, json.RawMessage(inner))
		if code, _ := post(t, h, http.MethodPost, sign(inSecret, time.Now(), body), body); code != http.StatusOK {
			t.Errorf("%s: %d", id, code)
		}
	}
	files := w.files(t)
	if d, e := files[msgID("C0DEAD001", "1700000601.000100")], files[msgID("C0DEAD001", "1700000601.000200")]; len(files) != 2 || d == nil || e == nil ||
		d.Metadata.Extra.Recalls != msgID("C0DEAD001", "1700000500.000100") || e.Metadata.Extra.Edits != msgID("C0DEAD001", "1700000500.000200") {
		t.Errorf("files %v", w.ids(t))
	}

	kept := w.deadLetters(t)
	if len(kept) != len(bad) {
		t.Fatalf("%d dead letters, want %d: %v", len(kept), len(bad), kept)
	}
	for id, b := range bad {
		found := false
		for _, k := range kept {
			if !strings.Contains(k[0], `"event_id": "`+id+`"`) {
				continue
			}
			found = true
			if !strings.HasPrefix(k[1], b.reason+"\nset aside by courier at ") || !strings.Contains(k[1], "from slack events api, event "+id+"\n") {
				t.Errorf("%s: reason %q, want %q", id, k[1], b.reason)
			}
			if !strings.Contains(k[0], `"type": "event_callback"`) || !strings.Contains(k[0], `"team_id": "T0FAKE"`) {
				t.Errorf("%s: not the request body:\n%s", id, k[0])
			}
			for _, secret := range []string{`"token"`, "unused", "xoxb-", inSecret} {
				if strings.Contains(k[0], secret) {
					t.Errorf("%s: %s kept in\n%s", id, secret, k[0])
				}
			}
		}
		if !found {
			t.Errorf("%s: no dead letter", id)
		}
	}
	if st := w.dl.Stats()[schema.Slack]; st.SetAside != uint64(len(bad)) || st.Refused != 0 {
		t.Errorf("stats %+v", st)
	}
	if cp := w.checkpoint(t, "C0DEAD001"); cp != "" && cp != "1700000601.000200" {
		t.Errorf("checkpoint %q", cp)
	}

	// app_rate_limited (Slack dropped events) and other payloads are
	// counted; the former asks the catch-up for a pass.
	rl := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","type":"app_rate_limited","team_id":"T123456","minute_rate_limited":1518467820,"api_app_id":"A123456"}`)
	if code, _ := post(t, h, http.MethodPost, sign(inSecret, time.Now(), rl), rl); code != http.StatusOK {
		t.Errorf("app_rate_limited: %d", code)
	}
	if got := w.a.ignored.Counts()["app_rate_limited"]; got != 1 {
		t.Errorf("app_rate_limited counted %d", got)
	}
}

// The same through Socket Mode: an event that cannot be placed is set
// aside (the envelope's payload, scrubbed), then acked; a slash command is
// acked and counted.
func TestDeadLetterSocket(t *testing.T) {
	w := newInWorld(t, "socket")
	startSocket(t, w, w.sink)
	env := send(t, w.fake, callback("EvSOCKDEAD", json.RawMessage(`{"type":"message","user":"U0ANN","text":"lost? xoxp-9-8-7"}`)))
	waitAcked(t, w.fake, env)
	kept := w.deadLetters(t)
	if len(kept) != 1 {
		t.Fatalf("dead letters %v", kept)
	}
	for _, k := range kept {
		if !strings.HasPrefix(k[1], "slack: the event (message) has no channel and no ts: it cannot be placed\n") || !strings.Contains(k[1], "from slack socket mode, event EvSOCKDEAD\n") {
			t.Errorf("reason %q", k[1])
		}
		if strings.Contains(k[0], "xoxp-") || strings.Contains(k[0], `"token"`) || !strings.Contains(k[0], `"event_id": "EvSOCKDEAD"`) {
			t.Errorf("payload\n%s", k[0])
		}
	}
	if n := len(w.files(t)); n != 0 {
		t.Errorf("%d message files", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := w.fake.SendEnvelope(ctx, "slash_commands", json.RawMessage(`{"command":"/deploy","text":"now","user_id":"U0ANN"}`))
	if err != nil {
		t.Fatal(err)
	}
	waitAcked(t, w.fake, id)
	if got := w.a.ignored.Counts()["interactive"]; got != 1 {
		t.Errorf("a slash command counted %d times", got)
	}
}

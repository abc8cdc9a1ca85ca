package lark

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/internal/testutil/larkfake"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// deadSink is the workspace's pipeline with its dead letters, as the
// service gives it to Sources and Webhooks, the given secrets taken out.
func deadSink(ws *wstest.Workspace, secrets ...string) (adapters.DeadLetterSink, *mailbox.DeadLetters) {
	dl := mailbox.NewDeadLetters(ws.MB, mailbox.DeadLetterLimits{})
	var ss []confkit.Secret
	for _, s := range secrets {
		ss = append(ss, confkit.Secret(s))
	}
	return service.NewDeadLetterSink(ws.Pipe, dl, ss, slog.New(slog.DiscardHandler)), dl
}

// larkDead returns the raw dead letters kept, payload and reason each.
func larkDead(t *testing.T, ws *wstest.Workspace) [][2]string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(ws.MB.Dir(mailbox.BoxDeadletter, schema.Lark), "*_raw_*.json"))
	var out [][2]string
	for _, n := range names {
		p, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		r, err := os.ReadFile(n + ".reason")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]string{string(p), string(r)})
	}
	return out
}

// findDead is the dead letter whose payload names eventID.
func findDead(kept [][2]string, eventID string) ([2]string, bool) {
	for _, k := range kept {
		if strings.Contains(k[0], `"event_id": "`+eventID+`"`) {
			return k, true
		}
	}
	return [2]string{}, false
}

// Message events that cannot be placed, over the long connection: each
// is acked (Lark's retries would not mend it) once it is set aside as a
// dead letter, the event as received less its verification token, with
// the reason; an event type Courier does not read is acked and counted.
func TestDeadLetterWS(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	sink, dl := deadSink(w.ws, wsVerifToken)
	wsStart(t, w, sink)
	noID := map[string]any{"schema": "2.0",
		"header": map[string]any{"event_id": "ev_noid", "token": wsVerifToken, "event_type": "im.message.receive_v1", "create_time": "1700000000000"},
		"event": map[string]any{"message": map[string]any{"chat_id": wsChat, "chat_type": "group", "message_type": "text", "content": `{"text":"who am I?"}`},
			"sender": map[string]any{"sender_id": map[string]any{"open_id": "ou_ann"}, "sender_type": "user"}}}
	noRecall := map[string]any{"schema": "2.0",
		"header": map[string]any{"event_id": "ev_norecall", "token": wsVerifToken, "event_type": "im.message.recalled_v1"},
		"event":  map[string]any{"chat_id": wsChat, "recall_time": "1700000000000"}}
	other := map[string]any{"schema": "2.0",
		"header": map[string]any{"event_id": "ev_read", "token": wsVerifToken, "event_type": "im.message.message_read_v1"},
		"event":  map[string]any{"message_id_list": []string{"om_x"}}}
	for _, ev := range []map[string]any{noID, noRecall, other} {
		body, _ := json.Marshal(ev)
		if ack := wsAck(t, w.fake, wsSend(t, w.fake, body)); ack.Code != 200 {
			t.Errorf("%v: ack %d, want 200", ev["header"], ack.Code)
		}
	}
	kept := larkDead(t, w.ws)
	if len(kept) != 2 {
		t.Fatalf("dead letters %v", kept)
	}
	for id, reason := range map[string]string{
		"ev_noid":     "lark: an im.message.receive_v1 event without a message_id: it cannot be placed",
		"ev_norecall": "lark: an im.message.recalled_v1 event that names no message (no message_id)",
	} {
		k, ok := findDead(kept, id)
		if !ok {
			t.Errorf("%s: no dead letter", id)
			continue
		}
		if !strings.HasPrefix(k[1], reason+"\nset aside by courier at ") || !strings.Contains(k[1], "from lark ws, event "+id+"\n") {
			t.Errorf("%s: reason %q", id, k[1])
		}
		if strings.Contains(k[0], wsVerifToken) || strings.Contains(k[0], `"token"`) || !strings.Contains(k[0], `"schema": "2.0"`) {
			t.Errorf("%s: payload\n%s", id, k[0])
		}
	}
	if ids := wsFiles(t, w); len(ids) != 0 {
		t.Errorf("files %v", ids)
	}
	if st := dl.Stats()[schema.Lark]; st.SetAside != 2 {
		t.Errorf("stats %+v", st)
	}
	if got := w.a.ignored.Counts()["event_type"]; got != 1 {
		t.Errorf("the other event type counted %d times", got)
	}
}

// The same through the webhook, encrypted and signed: the event is
// answered 200 and kept decrypted, without its token, beside its reason;
// neither the encrypt key nor the token is in it.
func TestDeadLetterWebhook(t *testing.T) {
	const token, key = "wh-verif-token-0001", "wh-encrypt-key-0001"
	w := whNew(t, token, key)
	sink, _ := deadSink(w.ws, token, key)
	w.h = w.wh.Handler(sink)
	body := whEnvelope(token, "ev_nochat", "im.message.receive_v1", map[string]any{
		"message": map[string]any{"message_id": "om_nochat", "chat_type": "group", "message_type": "text", "content": `{"text":"where am I? ` + key + `"}`},
		"sender":  map[string]any{"sender_id": map[string]string{"open_id": "ou_ann"}, "sender_type": "user"},
	})
	hdr, sealed := w.sealed(body)
	if code, resp := w.post(t, http.MethodPost, hdr, sealed); code != http.StatusOK {
		t.Fatalf("%d %q", code, resp)
	}
	kept := larkDead(t, w.ws)
	k, ok := findDead(kept, "ev_nochat")
	if len(kept) != 1 || !ok {
		t.Fatalf("dead letters %v", kept)
	}
	if !strings.HasPrefix(k[1], "lark: an im.message.receive_v1 event without a chat_id: it cannot be placed\n") || !strings.Contains(k[1], "from lark webhook, event ev_nochat\n") {
		t.Errorf("reason %q", k[1])
	}
	w.noSecrets(t, "the dead letter", k[0]+k[1])
	if strings.Contains(k[0], "encrypt") || !strings.Contains(k[0], `"message_id": "om_nochat"`) {
		t.Errorf("payload\n%s", k[0])
	}
	if ids := w.ids(t); len(ids) != 0 {
		t.Errorf("files %v", ids)
	}
}

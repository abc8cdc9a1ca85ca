package email

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// A message the server lists but sends no body for cannot become a
// message: it is set aside as a dead letter saying where it is (account,
// folder, UIDVALIDITY, UID) and why, before the checkpoint moves past it
// (it was skipped with a log line); it is left on the server as it was
// (not marked seen), and the next sync does not set it aside again.
func TestIMAPNoBodyDeadLetter(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{noBody: true})
	m.append(t, "INBOX", testMail(1, "Its body is lost"), time.Time{})
	ws := newWorkspace(t)
	dl := mailbox.NewDeadLetters(ws.mb, mailbox.DeadLetterLimits{})
	sink := service.NewDeadLetterSink(ws.pipe, dl, nil, slog.New(slog.DiscardHandler))
	src := m.source(t, ws, IMAPOptions{MarkSeen: true})
	for range 2 {
		if err := src.SyncOnce(ctx, sink); err != nil {
			t.Fatal(err)
		}
	}
	if files := ws.files(t); len(files) != 0 {
		t.Errorf("files %v", files)
	}
	validity := m.uidValidity(t, "INBOX")
	names, _ := filepath.Glob(filepath.Join(ws.mb.Dir(mailbox.BoxDeadletter, schema.Email), "*_raw_*.json"))
	if len(names) != 1 {
		t.Fatalf("dead letters %v", names)
	}
	payload, _ := os.ReadFile(names[0])
	reason, _ := os.ReadFile(names[0] + ".reason")
	for _, want := range []string{`"account": "work"`, `"folder": "INBOX"`, `"uid": 1`, fmt.Sprintf(`"uidvalidity": %d`, validity)} {
		if !strings.Contains(string(payload), want) {
			t.Errorf("payload lacks %s:\n%s", want, payload)
		}
	}
	if want := fmt.Sprintf("imap: the server sent no body for UID 1 (UIDVALIDITY %d): the message is still on the server, not in the mailbox\n", validity); !strings.HasPrefix(string(reason), want) ||
		!strings.Contains(string(reason), "from imap work/INBOX\n") {
		t.Errorf("reason %q", reason)
	}
	if st := dl.Stats()[schema.Email]; st.SetAside != 1 {
		t.Errorf("stats %+v", st)
	}
	if got, want := ws.checkpoint(t, "imap/work/INBOX"), fmt.Sprintf("%d:1", validity); got != want {
		t.Errorf("checkpoint %q, want %q", got, want)
	}
	if hasFlag(m.flags(t, "INBOX")[1], imap.FlagSeen) || m.rec.count("UID STORE") != 0 {
		t.Errorf("marked seen: %v, commands %v", m.flags(t, "INBOX"), m.rec.commands())
	}
}

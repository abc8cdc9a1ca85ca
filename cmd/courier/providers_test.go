package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/adapterstest"
	"github.com/monoco/courier/adapters/email"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/internal/providers/all"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// TestSeamTemplateProvider plugs the template provider (adapters/
// adapterstest) into the service as a new provider is plugged in: one row
// in the table. Nothing else of cmd/courier, mailbox, ingest, outbound or
// schema knows it; it must still receive from its Source and its Webhook,
// resolve and deliver drafts, recognise the echo of what it posted, and
// report its health.
func TestSeamTemplateProvider(t *testing.T) {
	chat := adapterstest.NewChat()
	const secret = "example-signing-secret"
	a := &app{providers: append(slices.Clip(all.Table), providers.Row{Name: schema.Discord, New: func(cfg *config.Config, env providers.Env) (*adapters.Provider, error) {
		return adapterstest.New(adapterstest.Options{Chat: chat, Bot: "bot", SigningSecret: secret})
	}})}
	ws := newWorkspace(t)
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	dz, err := dropzone.Open(mailbox.Layout{Root: ws}.Dropzone(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default(a.providerTable().Adapters())
	email.ConfigOf(cfg).Enabled = false
	cfg.Courier.Debounce.WindowMS = 1 // the template's messages debounce not; keep groups short anyway
	a.root = ws
	set, err := a.providerTable().Build(cfg, providers.Env{Dropzone: dz})
	if err != nil {
		t.Fatal(err)
	}
	var srv *httptest.Server
	_, lt := service.Assemble(cfg, set, mb, dz, slog.New(slog.DiscardHandler), func(h http.Handler) service.Component {
		return service.Component{Name: "http", Start: func(context.Context) error { srv = httptest.NewServer(h); return nil },
			Stop: func(context.Context) error { srv.Close(); return nil }}
	})
	if err := lt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer lt.Stop(context.Background())

	inbox := func(id string) bool {
		e, err := mb.Get(context.Background(), id)
		return err == nil && e.Direction == schema.Inbound
	}
	// In through the Source.
	chat.Post("#general", "ann", "the build is red")
	testutil.WaitFor(t, 10*time.Second, "the post to reach the mailbox", func() bool { return inbox("discord_general_1") })

	// In through the Webhook, mounted at /webhook/discord: a signed post is
	// written; an unsigned or wrongly signed one is refused and writes
	// nothing.
	body, _ := json.Marshal(adapterstest.Post{Channel: "#ops", ID: "900", User: "bob", Text: "deploy?"})
	post := func(sig string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/webhook/discord", bytes.NewReader(body))
		req.Header.Set("X-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(adapterstest.Sign("wrong", body)); code != http.StatusUnauthorized {
		t.Fatalf("wrongly signed webhook: %d, want 401", code)
	}
	if inbox("discord_ops_900") {
		t.Fatal("a wrongly signed webhook wrote a message")
	}
	if code := post(adapterstest.Sign(secret, body)); code != http.StatusNoContent {
		t.Fatalf("signed webhook: %d, want 204", code)
	}
	if !inbox("discord_ops_900") {
		t.Fatal("a signed webhook was acknowledged but its message is not in the mailbox")
	}

	// Out: send resolves a reply with the provider's Resolver (recipients
	// from the parent's session, the idempotency key), the engine delivers
	// it with the provider's Sender, and the archived draft records the
	// inbound id the receipt gave.
	d := &schema.Draft{ReplyTo: "discord_general_1", Content: schema.DraftContent{Text: "on it"}}
	if err := agents.ResolveDraft(context.Background(), mb, set, d, nil, "", 50); err != nil {
		t.Fatal(err)
	}
	if d.Provider != schema.Discord || len(d.To) != 1 || d.To[0] != "#general" || d.IdempotencyKey == "" {
		t.Fatalf("resolved draft: provider %q to %v key %q", d.Provider, d.To, d.IdempotencyKey)
	}
	d.ID = "discord_out_1"
	d.CreatedAt = schema.TimePtr(time.Now())
	if _, err := mb.Queue(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	var sent *schema.Draft
	testutil.WaitFor(t, 10*time.Second, "the draft to be delivered and archived", func() bool {
		sent, _, err = mb.Draft(context.Background(), d.ID)
		return err == nil && sent.Delivery != nil && sent.Delivery.Status == schema.DeliverySent
	})
	if sent.InboundID != "discord_general_2" || sent.Delivery.Channel != "#general" || sent.Delivery.ProviderMessageID != "2" {
		t.Fatalf("archived draft: inbound_id %q channel %q provider_message_id %q", sent.InboundID, sent.Delivery.Channel, sent.Delivery.ProviderMessageID)
	}
	posts, _ := chat.Posts(0)
	if len(posts) != 2 || posts[1].Text != "on it" || posts[1].Channel != "#general" {
		t.Fatalf("chat after the send: %+v", posts)
	}
	// The echo of our post comes back through the Source: it is ours, so
	// no inbound file is written for it, and a later post still is.
	chat.Post("#general", "ann", "thanks")
	testutil.WaitFor(t, 10*time.Second, "the next post", func() bool { return inbox("discord_general_3") })
	if id, ok, _ := mb.Lookup(context.Background(), "discord_general_2"); ok && id != d.ID {
		t.Fatalf("the echo of our own post became inbound message %s", id)
	}
	entries, _ := os.ReadDir(filepath.Join(mailbox.Layout{Root: ws}.Dir(mailbox.BoxInbound, schema.Discord)))
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("inbound/discord holds %d files, want 3 (two posts and the webhook's): %s", len(entries), strings.Join(names, ", "))
	}
	// Its health is on /health under its name.
	resp, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep struct {
		Adapters map[string]adapters.Health `json:"adapters"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if h, ok := rep.Adapters["discord"]; !ok || h.Status != adapters.StatusConnected || h.LastEvent == nil {
		t.Fatalf("/health adapters: %+v", rep.Adapters)
	}
}

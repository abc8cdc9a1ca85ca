package mcpserver

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/mcptest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// The journal is read every subscribedPoll while a session subscribes
// to the inbox, and every mailbox.WakerPoll when none does. (Over the
// 2026-07-28 protocol a subscription is a subscriptions/listen stream
// the client opens again in the background: the server hears of it a
// moment after Subscribe returns.)
func TestWatchPollsFasterWhenSubscribed(t *testing.T) {
	s, cs := inProcess(t)
	ctx := context.Background()
	if got := s.pollEvery(); got != mailbox.WakerPoll {
		t.Errorf("no subscription: polls every %v", got)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: MessageURI + "x"}); err != nil {
		t.Fatal(err)
	}
	if got := s.pollEvery(); got != mailbox.WakerPoll {
		t.Errorf("a message's subscription: polls every %v", got)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: InboxURI}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the inbox's subscription to poll faster", func() bool { return s.pollEvery() == subscribedPoll })
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: InboxURI}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the poll to slow down once unsubscribed", func() bool { return s.pollEvery() == mailbox.WakerPoll })
}

// Over stdio, the service writes the mail (another Mailbox on the same
// workspace stands for it): each arrival is notified well within the
// second the poll used to leave (4 of 25 took 267 to 701 ms).
func TestStdioNotifiesQuickly(t *testing.T) {
	ws, w := newWorkspace(t)
	s := New(Options{Mailbox: w.mb, Dropzone: w.dz,
		Local: &agents.Local{Root: ws, Config: config.Default(nil), User: "agent", Workspace: w}})
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.ServeStdio(ctx, sr, sw); close(done) }()
	t.Cleanup(func() { cancel(); sr.Close(); sw.Close(); <-done })
	updated := make(chan struct{}, 64)
	cs := mcptest.Connect(t, &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { updated <- struct{}{} }})
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: InboxURI}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the server to hear of the subscription", func() bool { return s.pollEvery() == subscribedPoll })
	other, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	t0 := testutil.Time("2026-03-01T08:00:00Z")
	var slow []string
	for i := range 25 {
		m := testutil.Message(schema.Slack, fmt.Sprintf("C1_%010d", i), t0.Add(time.Duration(i)*time.Second), "hello")
		if _, err := other.WriteInbound(ctx, []mailbox.Inbound{{Message: m}}, nil); err != nil {
			t.Fatal(err)
		}
		start := time.Now() // committed
		select {
		case <-updated:
		case <-time.After(5 * time.Second):
			t.Fatalf("arrival %d not notified", i)
		}
		if d := time.Since(start); d > 250*time.Millisecond {
			slow = append(slow, fmt.Sprintf("#%d %v", i, d))
		}
		time.Sleep(time.Duration(i%7) * 37 * time.Millisecond) // another phase of the poll
	}
	if len(slow) > 0 {
		t.Errorf("%d of 25 arrivals notified after over 250 ms: %v", len(slow), slow)
	}
}

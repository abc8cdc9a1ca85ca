// Command genmailbox fills a workspace with synthetic inbound messages
// through the real write path (mailbox.WriteInbound: staged, fsynced,
// renamed, indexed), for the benchmarks in bench/. It prints the write
// rate it saw.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

func main() {
	root := flag.String("root", "", "workspace to fill (created)")
	n := flag.Int("n", 100000, "messages")
	batch := flag.Int("batch", 256, "messages per durable batch")
	naive := flag.Bool("naive", false, "baseline: write each file on its own (tmp, fsync, rename, fsync dir), no index")
	flag.Parse()
	if *root == "" {
		log.Fatal("genmailbox: -root is required")
	}
	if err := mailbox.Init(*root); err != nil {
		log.Fatal(err)
	}
	if *naive {
		writeNaive(*root, *n)
		return
	}
	mb, err := mailbox.Open(*root, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer mb.Close()
	ctx := context.Background()
	start := time.Now()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < *n; i += *batch {
		var in []mailbox.Inbound
		for j := i; j < min(i+*batch, *n); j++ {
			in = append(in, mailbox.Inbound{Message: message(j, base.Add(time.Duration(j)*time.Second))})
		}
		if _, err := mb.WriteInbound(ctx, in, []mailbox.Checkpoint{{Key: "gen", Value: fmt.Sprint(i)}}); err != nil {
			log.Fatal(err)
		}
	}
	d := time.Since(start)
	fmt.Fprintf(os.Stdout, "wrote %d messages in %.2fs: %.0f messages/s (batches of %d, durable)\n", *n, d.Seconds(), float64(*n)/d.Seconds(), *batch)
}

var providers = []schema.Provider{schema.Email, schema.Lark, schema.Slack}

// message makes a realistic message of about 1.5 KB.
func message(i int, at time.Time) *schema.Message {
	p := providers[i%3]
	text := fmt.Sprintf("Message %d: %s", i, strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12))
	m := &schema.Message{
		Provider: p, Direction: schema.Inbound,
		Participants: schema.Participants{From: schema.Participant{ID: fmt.Sprintf("user%d", i%50), Name: fmt.Sprintf("User %d", i%50)}},
		Timestamp:    schema.NewTime(at), ReceivedAt: schema.NewTime(at.Add(time.Second)),
		Type: schema.TypeText, Content: schema.Content{Text: schema.NullString(text), Markdown: schema.NullString(text)},
		Metadata: schema.Metadata{SchemaVersion: schema.SchemaVersion, ProtocolVersion: schema.ProtocolVersion},
		Body:     text + "\n",
	}
	switch p {
	case schema.Email:
		m.ID = fmt.Sprintf("email_%020x", i)
		key := fmt.Sprintf("email-thread:t%d@example.com", i/7)
		m.Session = schema.Session{ID: key, Type: schema.Thread, Name: fmt.Sprintf("Subject %d", i/7), ThreadKey: schema.NullString(key)}
		addr := fmt.Sprintf("user%d@example.com", i%50)
		m.Participants.From = schema.Participant{ID: addr, Name: fmt.Sprintf("User %d", i%50), Email: addr}
		m.Participants.To = []schema.Participant{{ID: "agent@example.com", Name: "Agent", Email: "agent@example.com"}}
		m.Metadata.ProviderRaw = map[string]any{"message_id": fmt.Sprintf("<%d@example.com>", i), "subject": m.Session.Name}
	case schema.Lark:
		m.ID = fmt.Sprintf("lark_om_%d", i)
		m.Session = schema.Session{ID: fmt.Sprintf("oc_%d", i%20), Type: schema.Group, Name: "Dev group"}
	default:
		m.ID = fmt.Sprintf("slack_C%07d_%d_000100", i%20, 1700000000+i)
		m.Session = schema.Session{ID: fmt.Sprintf("C%07d", i%20), Type: schema.Group}
	}
	if i%10 == 0 {
		m.CorrelationID = schema.NullString(fmt.Sprintf("task_%d", i/100))
	}
	return m
}

// writeNaive is what a straightforward durable writer does: one file at a
// time, each fsynced, renamed and its directory fsynced, no batching and no
// index. It is the baseline the batched write path is compared with.
func writeNaive(root string, n int) {
	l := mailbox.Layout{Root: root}
	tmp := l.Tmp()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	for i := 0; i < n; i++ {
		m := message(i, base.Add(time.Duration(i)*time.Second))
		data, err := schema.Encode(m)
		if err != nil {
			log.Fatal(err)
		}
		dir := l.Dir(mailbox.BoxInbound, m.Provider)
		t := filepath.Join(tmp, "naive.tmp")
		f, err := os.OpenFile(t, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o444)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			log.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			log.Fatal(err)
		}
		f.Close()
		if err := os.Rename(t, filepath.Join(dir, mailbox.FileName(m.Timestamp.Time, m.ID))); err != nil {
			log.Fatal(err)
		}
		d, err := os.Open(dir)
		if err != nil {
			log.Fatal(err)
		}
		d.Sync()
		d.Close()
	}
	el := time.Since(start)
	fmt.Printf("naive: wrote %d messages in %.2fs: %.0f messages/s (one durable file at a time, no index)\n", n, el.Seconds(), float64(n)/el.Seconds())
}

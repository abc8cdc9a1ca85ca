package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Debounce configures merging of IM messages. A zero Window turns it off.
type Debounce struct {
	Window  time.Duration // quiet time that closes a group (default 5 s)
	MaxWait time.Duration // a group is flushed at most this long after its first message (default 30 s)
}

type group struct {
	name        string
	first, last time.Time
	msgs        []mailbox.Inbound
}

// flushStaged takes in the debounce groups staged before a restart
// (Start) and flushes them, in name order, before the writer runs.
func (p *Pipeline) flushStaged(ctx context.Context) error {
	groups, bad, err := p.mb.StagedGroups()
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	for _, b := range bad {
		p.log.Warn("staged debounce file does not parse; left in place", "file", b)
	}
	names := make([]string, 0, len(groups))
	for name, msgs := range groups {
		g := &group{name: name, msgs: msgs}
		p.groups[name] = g
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) > 0 {
		// Flush at once: the window of a group staged before a restart
		// has no meaning now, and new messages must not join a group
		// whose merged file may already be written.
		if err := p.process(ctx, []*request{{flush: names}}); err != nil {
			return fmt.Errorf("ingest: flush staged groups: %w", err)
		}
		p.log.Info("flushed debounce groups staged before the restart", "groups", len(names))
	}
	return nil
}

func (p *Pipeline) resetTimer(t *time.Timer) {
	next := time.Hour
	now := p.opts.Now()
	for _, g := range p.groups {
		if d := p.deadline(g).Sub(now); d < next {
			next = d
		}
	}
	if next < time.Millisecond {
		next = time.Millisecond
	}
	t.Reset(next)
}

func (p *Pipeline) deadline(g *group) time.Time {
	d := g.last.Add(p.opts.Debounce.Window)
	if m := g.first.Add(p.opts.Debounce.MaxWait); m.Before(d) {
		d = m
	}
	return d
}

func (p *Pipeline) dueGroups() []string {
	now := p.opts.Now()
	var due []string
	for name, g := range p.groups {
		if !now.Before(p.deadline(g)) {
			due = append(due, name)
		}
	}
	sort.Strings(due)
	return due
}

// debounce puts a message in its group, opening the group (its window
// starts now) or extending it.
func (p *Pipeline) debounce(w *batchWork, in mailbox.Inbound) {
	name := groupName(in.Message)
	w.stage[name] = append(w.stage[name], in)
	g := p.groups[name]
	if g == nil {
		g = &group{name: name, first: w.now}
		p.groups[name] = g
	}
	g.last = w.now
}

// stageGroups makes the batch's debounced messages durable in their
// groups' staging files, in group name order, and adds them to the groups.
func (p *Pipeline) stageGroups(w *batchWork) error {
	names := make([]string, 0, len(w.stage))
	for name := range w.stage {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		msgs := w.stage[name]
		if err := p.mb.Stage(name, p.seq, msgs); err != nil {
			// Undo the in-memory side; the source will redeliver.
			p.forgetStaged(name)
			return err
		}
		p.seq += uint64(len(msgs))
		g := p.groups[name]
		g.msgs = append(g.msgs, msgs...)
		for _, in := range msgs {
			p.staged[in.Message.ID] = true
			for _, k := range in.Keys {
				p.staged[k] = true
			}
		}
	}
	return nil
}

// mergeFlushed merges each group to flush (every group when the batch
// flushes all) into one message to write, and returns the groups merged.
func (p *Pipeline) mergeFlushed(w *batchWork) []string {
	flush := w.flush
	if w.flushAll {
		flush = flush[:0]
		for name := range p.groups {
			flush = append(flush, name)
		}
		sort.Strings(flush)
	}
	var flushed []string
	for _, name := range dedupeStrings(flush) {
		g := p.groups[name]
		if g == nil || len(g.msgs) == 0 {
			delete(p.groups, name)
			continue
		}
		merged, keys := p.merge(g.msgs)
		w.direct = append(w.direct, mailbox.Inbound{Message: merged, Keys: keys})
		flushed = append(flushed, name)
	}
	return flushed
}

// forgetFlushed drops the groups whose merged message is written: from
// memory, from the staged keys and from the staging area.
func (p *Pipeline) forgetFlushed(flushed []string) {
	for _, name := range flushed {
		g := p.groups[name]
		delete(p.groups, name)
		for _, in := range g.msgs {
			delete(p.staged, in.Message.ID)
			for _, k := range in.Keys {
				delete(p.staged, k)
			}
		}
		if err := p.mb.Unstage(name); err != nil {
			// Harmless: the staged copies are duplicates now and will be
			// dropped when they are found again.
			p.log.Warn("could not remove a flushed debounce group", "group", name, "err", err)
		}
	}
}

// flushDue asks the writer to flush the groups that are due, and waits.
func (p *Pipeline) flushDue(ctx context.Context) error {
	return p.call(ctx, &request{due: true, done: make(chan error, 1)})
}

func (p *Pipeline) forgetStaged(name string) {
	g := p.groups[name]
	if g != nil && len(g.msgs) == 0 {
		delete(p.groups, name)
	}
}

// groupName is the staging name of a message's debounce group: provider,
// session, thread and sender.
func groupName(m *schema.Message) string {
	key := strings.Join([]string{string(m.Provider), m.Session.ID, string(m.Session.ThreadKey), m.Participants.From.ID}, "\x00")
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:12])
}

// merge makes one message of a debounce group: the first message's identity
// and time, the contents joined in order, artifacts and mentions gathered.
func (p *Pipeline) merge(msgs []mailbox.Inbound) (*schema.Message, []string) {
	first := *msgs[0].Message
	if len(msgs) == 1 {
		return &first, msgs[0].Keys
	}
	m := first
	m.Artifacts = nil
	m.Participants.Mentions = nil
	var texts, mds, bodies []string
	var keys, ids []string
	typ := first.Type
	runes := 0
	for i, in := range msgs {
		x := in.Message
		ids = append(ids, x.ID)
		keys = append(keys, in.Keys...)
		if i > 0 {
			keys = append(keys, x.ID)
		}
		text := string(x.Content.Text)
		for _, mn := range x.Participants.Mentions {
			if mn.Offset != nil {
				o := *mn.Offset + runes
				mn.Offset = &o
			}
			m.Participants.Mentions = append(m.Participants.Mentions, mn)
		}
		if text != "" {
			texts = append(texts, text)
			runes += utf8.RuneCountInString(text) + 1
		}
		if x.Content.Markdown != "" {
			mds = append(mds, string(x.Content.Markdown))
		}
		if b := strings.TrimRight(x.Body, "\n"); b != "" {
			bodies = append(bodies, b)
		}
		m.Artifacts = append(m.Artifacts, x.Artifacts...)
		if x.Type != typ {
			typ = schema.TypeMixed
		}
		if e := x.Metadata.Extra.EventID; e != "" && i > 0 {
			keys = append(keys, mailbox.EventKey(x.Provider, e))
		}
		if m.CorrelationID == "" {
			m.CorrelationID = x.CorrelationID
		}
	}
	m.Type = typ
	m.Content.Text = schema.NullString(strings.Join(texts, "\n"))
	m.Content.Markdown = schema.NullString(strings.Join(mds, "\n\n"))
	m.Body = strings.Join(bodies, "\n\n") + "\n"
	m.ReceivedAt = msgs[len(msgs)-1].Message.ReceivedAt
	m.Metadata.Extra.MergedIDs = ids
	p.counter(m.Provider).merged.Add(uint64(len(msgs) - 1))
	return &m, dedupeStrings(keys)
}

func dedupeStrings(in []string) []string {
	seen := map[string]bool{}
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

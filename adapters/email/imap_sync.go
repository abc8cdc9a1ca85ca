package email

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
)

// checkpointKey is where a folder's position is saved.
func (s *IMAPSource) checkpointKey(folder string) string {
	return "imap/" + s.opts.Account + "/" + folder
}

// syncFolder ingests everything new in a folder since its checkpoint.
func (s *IMAPSource) syncFolder(ctx context.Context, ic *imapConn, folder string, sink adapters.Sink) error {
	ic.deadline(s.opts.Timeout)
	readOnly := !s.opts.MarkSeen && s.opts.MoveTo == ""
	sel, err := ic.c.Select(folder, &imap.SelectOptions{ReadOnly: readOnly}).Wait()
	if err != nil {
		return fmt.Errorf("select %q: %w", folder, err)
	}
	pos, err := s.position(ctx, folder, sel.UIDValidity, sink)
	if err != nil {
		return err
	}
	var uids []imap.UID
	if sel.NumMessages > 0 {
		if uids, err = s.newUIDs(ic, folder, pos.last); err != nil {
			return err
		}
	}
	if len(uids) == 0 {
		if pos.saved != pos.validity {
			ic.clearDeadline() // the server has nothing to say while the sink writes
			return sink.Deliver(ctx, adapters.Event{Checkpoint: pos.checkpoint(pos.last)})
		}
		return nil
	}
	return s.ingest(ctx, ic, folder, pos, uids, sink)
}

// folderPosition is where a folder's sync stands.
type folderPosition struct {
	key      string   // the checkpoint's key
	saved    uint32   // the UIDVALIDITY of the saved checkpoint; 0 when none
	validity uint32   // the folder's UIDVALIDITY now
	last     imap.UID // the last UID ingested; 0 after a UIDVALIDITY change
}

// checkpoint is the folder's checkpoint once everything up to uid is
// ingested.
func (p folderPosition) checkpoint(uid imap.UID) *adapters.Checkpoint {
	return &adapters.Checkpoint{Key: p.key, Value: fmt.Sprintf("%d:%d", p.validity, uid)}
}

// position reads the folder's checkpoint ("uidvalidity:uid"). When the
// folder's UIDVALIDITY is not the one saved, the folder is synced again
// from the start, with a warning.
func (s *IMAPSource) position(ctx context.Context, folder string, validity uint32, sink adapters.Sink) (folderPosition, error) {
	pos := folderPosition{key: s.checkpointKey(folder), validity: validity}
	if v, ok, err := sink.Checkpoint(ctx, pos.key); err != nil {
		return pos, err
	} else if ok {
		a, b, _ := strings.Cut(v, ":")
		vv, _ := strconv.ParseUint(a, 10, 32)
		uu, _ := strconv.ParseUint(b, 10, 32)
		pos.saved, pos.last = uint32(vv), imap.UID(uu)
	}
	if pos.saved != 0 && pos.saved != validity {
		s.log.With("folder", folder).Warn("imap: UIDVALIDITY changed; syncing the folder again (messages already in the mailbox are not written twice)",
			"was", pos.saved, "now", validity)
		pos.last = 0
	}
	return pos, nil
}

// newUIDs returns the UIDs after last, in order; on the first sync (last
// is 0) only those received since IMAPOptions.Since, when set.
func (s *IMAPSource) newUIDs(ic *imapConn, folder string, last imap.UID) ([]imap.UID, error) {
	crit := &imap.SearchCriteria{UID: []imap.UIDSet{{imap.UIDRange{Start: last + 1, Stop: 0}}}}
	if last == 0 && !s.opts.Since.IsZero() {
		crit.Since = s.opts.Since
	}
	res, err := ic.c.UIDSearch(crit, nil).Wait()
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", folder, err)
	}
	var uids []imap.UID
	for _, u := range res.AllUIDs() {
		if u > last { // "n:*" always matches the last message
			uids = append(uids, u)
		}
	}
	slices.Sort(uids)
	return uids, nil
}

// ingest fetches uids a chunk at a time and delivers each chunk with the
// checkpoint of its last UID, showing progress. One chunk is made durable
// while the next is fetched: the fsyncs of chunk k overlap the network and
// parsing of chunk k+1. Deliveries stay in order, so checkpoints still move
// only after their files.
func (s *IMAPSource) ingest(ctx context.Context, ic *imapConn, folder string, pos folderPosition, uids []imap.UID, sink adapters.Sink) error {
	prog := newProgress(s.opts.Progress, s.opts.Account+" "+folder, len(uids))
	defer prog.finish()
	var pend *pendingChunk
	for i := 0; i < len(uids); {
		chunk := uids[i:min(i+s.opts.Chunk, len(uids))]
		c, err := s.fetchChunk(ctx, ic, folder, pos.validity, chunk)
		if err != nil {
			s.settle(ic, pend)
			return err
		}
		chunk = chunk[:c.taken] // the rest, over the chunk's text, is the next chunk's
		i += c.taken
		if err := s.settle(ic, pend); err != nil {
			c.batch.Abort()
			return err
		}
		pend = &pendingChunk{errc: make(chan error, 1), done: c.done}
		go func(c *fetched, errc chan<- error, cp *adapters.Checkpoint) {
			errc <- c.commit(ctx, sink, cp, s.log)
		}(c, pend.errc, pos.checkpoint(chunk[len(chunk)-1]))
		prog.add(len(chunk))
		s.Event()
	}
	return s.settle(ic, pend)
}

// settle waits for the chunk being made durable, if any, then marks seen or
// moves what it holds (after). The connection is rightly quiet meanwhile.
func (s *IMAPSource) settle(ic *imapConn, pend *pendingChunk) error {
	if pend == nil {
		return nil
	}
	ic.clearDeadline()
	if err := <-pend.errc; err != nil {
		return err
	}
	s.after(ic, pend.done)
	return nil
}

// pendingChunk is a chunk being made durable.
type pendingChunk struct {
	errc chan error
	done []imap.UID
}

// fetched is a chunk read from the server: its events, the dropzone batch
// holding their raw messages and attachments, and the UIDs the mailbox
// holds once it is delivered; dead are the messages the server sent no
// body for, set aside when the chunk is committed.
type fetched struct {
	events []adapters.Event
	batch  *dropzone.Batch
	done   []imap.UID
	taken  int // how many of the chunk's UIDs it covers
	dead   []adapters.DeadLetter

	folder   string // where it was read
	validity uint32
}

// commit makes the chunk durable: the dropzone batch, the dead letters,
// then the messages and the checkpoint, which goes last so that it moves
// only once all are.
func (c *fetched) commit(ctx context.Context, sink adapters.Sink, cp *adapters.Checkpoint, log *slog.Logger) error {
	if err := c.batch.Commit(); err != nil {
		c.batch.Abort()
		return err
	}
	for _, d := range c.dead {
		if err := adapters.SetAside(ctx, sink, log, d); err != nil {
			return err
		}
	}
	return sink.Deliver(ctx, append(c.events, adapters.Event{Checkpoint: cp})...)
}

// bodiless is the dead letter of a message the server listed but sent no
// body for: the message stays on the server, and the checkpoint moves
// past it, so what is kept is where to find it.
func (s *IMAPSource) bodiless(folder string, validity uint32, fm *fetchedMessage) adapters.DeadLetter {
	ref, _ := json.Marshal(map[string]any{"account": s.opts.Account, "folder": folder, "uidvalidity": validity, "uid": uint32(fm.uid)})
	return adapters.DeadLetter{Provider: schema.Email, Source: "imap " + s.opts.Account + "/" + folder, Payload: ref,
		Reason: fmt.Sprintf("imap: the server sent no body for UID %d (UIDVALIDITY %d): the message is still on the server, not in the mailbox", fm.uid, validity)}
}

// after marks seen or moves what a delivered chunk holds, when asked.
func (s *IMAPSource) after(ic *imapConn, done []imap.UID) {
	if len(done) == 0 || (!s.opts.MarkSeen && s.opts.MoveTo == "") {
		return
	}
	set := imap.UIDSetNum(done...)
	ic.deadline(s.opts.Timeout)
	if s.opts.MarkSeen {
		if err := ic.c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close(); err != nil {
			s.log.Warn("imap: could not mark messages seen", "err", err)
		}
	}
	if s.opts.MoveTo != "" {
		if _, err := ic.c.Move(set, s.opts.MoveTo).Wait(); err != nil {
			s.log.Warn("imap: could not move ingested messages", "to", s.opts.MoveTo, "err", err)
		}
	}
}

// fetchChunk fetches and normalises some messages into a dropzone batch;
// the caller commits it. Messages over IMAPOptions.MaxMessage are fetched
// with their header only.
func (s *IMAPSource) fetchChunk(ctx context.Context, ic *imapConn, folder string, validity uint32, uids []imap.UID) (*fetched, error) {
	ic.deadline(s.opts.Timeout)
	want, sizes, err := s.sizes(ic, uids)
	if err != nil {
		return nil, err
	}
	uids, want = s.fit(uids, want, sizes)
	c := &fetched{batch: s.opts.Dropzone.NewBatch(), taken: len(uids), folder: folder, validity: validity}
	if len(want) == 0 {
		return c, nil
	}
	norm := func(fm *fetchedMessage) (*schema.Message, error) {
		return s.normalise(fm, c.batch, folder, validity, sizes)
	}
	full := &imap.FetchItemBodySection{Peek: true}
	header := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader}
	small, large := s.bySize(uids, want, sizes)
	for _, set := range []struct {
		uids    imap.UIDSet
		section *imap.FetchItemBodySection
	}{{small, full}, {large, header}} {
		if len(set.uids) == 0 {
			continue
		}
		if err := s.fetchBodies(ic, c, set.uids, set.section, set.section == header, norm); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// sizes fetches the sizes of uids, the messages to fetch. Every message
// is fetched, also one whose Message-ID the mailbox holds (a re-sync after
// a UIDVALIDITY change, mail in two folders, mail we sent), because an id
// proves nothing (anyone can write one): the pipeline compares digests,
// and a copy of a message filed is a duplicate there (adapters.Content).
func (s *IMAPSource) sizes(ic *imapConn, uids []imap.UID) (want imap.UIDSet, sizes map[imap.UID]int64, err error) {
	sizes = map[imap.UID]int64{}
	msgs, err := ic.c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, RFC822Size: true}).Collect()
	if err != nil {
		return nil, nil, fmt.Errorf("fetch sizes: %w", err)
	}
	for _, m := range msgs {
		want.AddNum(m.UID)
		sizes[m.UID] = m.RFC822Size
	}
	return want, sizes, nil
}

// chunkTexts bounds the text the messages of a chunk keep, in texts of
// the most a message file keeps (Bounds.MaxText): a chunk's messages stay
// in memory until it is durable, and the next chunk is fetched meanwhile,
// so 250 newsletters of 4 MB must not make one chunk of a gigabyte.
const chunkTexts = 8

// fit cuts a chunk short where the text its wanted messages keep (each
// counted as its size, up to the text bound) passes chunkTexts bounds:
// the UIDs and wanted ones before that point are the chunk's, the rest
// the next one's. A chunk takes at least its first UID.
func (s *IMAPSource) fit(uids []imap.UID, want imap.UIDSet, sizes map[imap.UID]int64) ([]imap.UID, imap.UIDSet) {
	limit := s.opts.Bounds.maxText()
	var sum int64
	for i, u := range uids {
		if !want.Contains(u) {
			continue
		}
		if sum += min(sizes[u], limit); sum <= chunkTexts*limit || i == 0 {
			continue
		}
		uids = uids[:i]
		var w imap.UIDSet
		for _, u := range uids {
			if want.Contains(u) {
				w.AddNum(u)
			}
		}
		return uids, w
	}
	return uids, want
}

// bySize splits the wanted UIDs, in the chunk's order, into those fetched
// whole and those over IMAPOptions.MaxMessage.
func (s *IMAPSource) bySize(uids []imap.UID, want imap.UIDSet, sizes map[imap.UID]int64) (small, large imap.UIDSet) {
	for _, u := range uids {
		if !want.Contains(u) {
			continue
		}
		if s.opts.MaxMessage > 0 && sizes[u] > s.opts.MaxMessage {
			large.AddNum(u)
		} else {
			small.AddNum(u)
		}
	}
	return small, large
}

// fetchBodies fetches the section of the messages of set into c: they are
// read off the connection in order and normalised by norm on workers, one
// per CPU; c gets their events and UIDs in order. On an error the batch is
// aborted.
func (s *IMAPSource) fetchBodies(ic *imapConn, c *fetched, set imap.UIDSet, section *imap.FetchItemBodySection, headerOnly bool, norm func(*fetchedMessage) (*schema.Message, error)) error {
	ic.deadline(s.opts.Timeout)
	cmd := ic.c.Fetch(set, &imap.FetchOptions{UID: true, InternalDate: true, BodySection: []*imap.FetchItemBodySection{section}})
	pool := newNormalisePool(norm)
	var readErr error
	for {
		msg := cmd.Next()
		if msg == nil {
			break
		}
		fm, err := s.readMessage(msg, c.batch, headerOnly)
		if err != nil {
			readErr = err
			break
		}
		if fm.mem == nil && fm.obj == nil {
			c.dead = append(c.dead, s.bodiless(c.folder, c.validity, fm))
		} else {
			pool.add(fm)
		}
		ic.deadline(s.opts.Timeout)
	}
	results, err := pool.wait()
	if readErr != nil || err != nil {
		cmd.Close()
		c.batch.Abort()
		return errors.Join(readErr, err)
	}
	for _, r := range results {
		c.events = append(c.events, event(r.m, s.opts.Verifier, s.opts.DedupeWindow))
		c.done = append(c.done, r.uid)
	}
	if err := cmd.Close(); err != nil {
		c.batch.Abort()
		return fmt.Errorf("fetch: %w", err)
	}
	return nil
}

// fetchedMessage is one FETCH response read off the connection: small
// messages are held in memory, larger ones streamed into the dropzone.
type fetchedMessage struct {
	uid        imap.UID
	internal   time.Time
	mem        []byte           // the raw message, when small
	obj        *dropzone.Object // the raw message, when streamed
	headerOnly bool
}

// inMemory is the size up to which a raw message is read into memory and
// stored and parsed by a worker; larger ones are streamed to the dropzone
// as they arrive, so memory stays flat whatever their size.
const inMemory = 256 << 10

// readMessage reads one FETCH response. It runs on the connection's
// goroutine and does only what must happen in order; normalise does the
// rest on a worker.
func (s *IMAPSource) readMessage(msg *imapclient.FetchMessageData, batch *dropzone.Batch, headerOnly bool) (*fetchedMessage, error) {
	fm := &fetchedMessage{headerOnly: headerOnly}
	for {
		item := msg.Next()
		if item == nil {
			break
		}
		switch it := item.(type) {
		case imapclient.FetchItemDataUID:
			fm.uid = it.UID
		case imapclient.FetchItemDataInternalDate:
			fm.internal = it.Time
		case imapclient.FetchItemDataBodySection:
			if it.Literal == nil {
				continue
			}
			if it.Literal.Size() <= inMemory {
				b, err := readLiteral(it.Literal, it.Literal.Size())
				if err != nil {
					return nil, fmt.Errorf("read message: %w", err)
				}
				fm.mem = b
				continue
			}
			obj, err := batch.Put(it.Literal)
			if err != nil {
				return nil, fmt.Errorf("store message: %w", err)
			}
			fm.obj = &obj
		}
	}
	if fm.mem == nil && fm.obj == nil {
		return fm, nil // no body: set aside (fetchBodies)
	}
	if fm.internal.IsZero() {
		fm.internal = time.Now()
	}
	return fm, nil
}

// readLiteral is io.ReadAll of a literal that says its size: read into a
// slice of that size (and one byte more, for the read that finds the end),
// where io.ReadAll grew one from 512 bytes, copying as it went.
func readLiteral(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than it said: grow, as io.ReadAll does
		}
	}
}

// normalise stores a fetched message's raw form (if not yet stored) and
// makes the protocol message of it. It is safe to run on several messages
// at once: a Batch takes concurrent Puts.
func (s *IMAPSource) normalise(fm *fetchedMessage, batch *dropzone.Batch, folder string, validity uint32, sizes map[imap.UID]int64) (*schema.Message, error) {
	var r io.Reader
	if fm.mem != nil {
		obj, err := batch.PutFresh(bytes.NewReader(fm.mem))
		if err != nil {
			return nil, fmt.Errorf("store message: %w", err)
		}
		fm.obj, r = &obj, bytes.NewReader(fm.mem)
	} else {
		f, err := batch.Open(*fm.obj)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	m, err := Normalize(r, batch, *fm.obj, NormalizeOptions{
		Account: s.opts.Account, Folder: folder, Own: s.opts.Addresses, ReceivedAt: fm.internal.UTC(),
		UID: uint32(fm.uid), UIDValidity: validity, MaxArtifact: s.opts.MaxArtifact, Verifier: s.opts.Verifier,
		Bounds: s.opts.Bounds, Raw: fm.mem,
	})
	if err != nil {
		return nil, err
	}
	if fm.headerOnly {
		note := fmt.Sprintf("message of %d bytes is over the limit of %d (courier.limits.max_message_bytes): only its headers were fetched; it is still on the server", sizes[fm.uid], s.opts.MaxMessage)
		if m.Metadata.Extra.ParseError != "" {
			note = string(m.Metadata.Extra.ParseError) + "; " + note
		}
		m.Metadata.Extra.ParseError = schema.Text(note)
		bodyNotFetched(m.Metadata.Extra.Auth)
	}
	return m, nil
}

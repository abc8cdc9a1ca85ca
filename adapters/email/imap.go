package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// IMAPOptions configure an IMAPSource.
type IMAPOptions struct {
	Account   string
	Addresses []string // the account's own addresses
	Server    Server
	Folders   []string
	// Mode is idle (push, falling back to polling when the server lacks
	// IDLE) or poll.
	Mode         string
	PollInterval time.Duration
	// Since limits the first backfill to mail received since then.
	Since time.Time
	// MarkSeen and MoveTo change the server after ingest; off by default
	// (Courier never changes the server unless asked).
	MarkSeen bool
	MoveTo   string

	Dropzone    *dropzone.Store
	MaxArtifact int64
	MaxMessage  int64 // larger messages are written with their headers only
	Logger      *slog.Logger
	// Progress receives backfill progress lines (a terminal); nil is silent.
	Progress io.Writer
	// Heartbeat is how often IDLE is interrupted for a NOOP, so that a dead
	// connection is noticed (default 4 min).
	Heartbeat time.Duration
	// Timeout bounds each command (default 60 s).
	Timeout time.Duration
	// Chunk is how many messages are fetched and made durable together
	// (default 250).
	Chunk int
}

// IMAPSource ingests an account's IMAP folders: a backfill, then IDLE (or
// polling), with per-folder checkpoints that move only after the files are
// durable, re-sync on UIDVALIDITY change, and reconnection with backoff.
type IMAPSource struct {
	opts IMAPOptions
	log  *slog.Logger
	adapters.HealthTracker
}

var (
	_ adapters.Source         = (*IMAPSource)(nil)
	_ adapters.Starter        = (*IMAPSource)(nil)
	_ adapters.HealthReporter = (*IMAPSource)(nil)
)

// NewIMAPSource returns a source. It does no I/O.
func NewIMAPSource(opts IMAPOptions) *IMAPSource {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if len(opts.Folders) == 0 {
		opts.Folders = []string{"INBOX"}
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Minute
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 4 * time.Minute
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.Chunk <= 0 {
		opts.Chunk = 250
	}
	return &IMAPSource{opts: opts, log: opts.Logger.With("account", opts.Account)}
}

// Name implements adapters.Source.
func (s *IMAPSource) Name() string { return "email/" + s.opts.Account + "/imap" }

// Start checks the account: bad credentials fail the service's start; an
// unreachable server only warns (Run keeps trying).
func (s *IMAPSource) Start(ctx context.Context) error {
	ic, err := s.connect(ctx)
	if err != nil {
		if errors.Is(err, errAuth) {
			return err
		}
		s.log.Warn("imap: server unreachable at start; will keep trying", "err", err)
		s.Error(err)
		return nil
	}
	ic.close()
	return nil
}

// Check is for `courier doctor`: connect, log in, and examine each folder.
func (s *IMAPSource) Check(ctx context.Context) error {
	ic, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer ic.close()
	for _, f := range s.opts.Folders {
		if _, err := ic.c.Select(f, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			return fmt.Errorf("imap %s: folder %q: %v (check courier.adapters.email.accounts[].imap.folders)", s.opts.Server.addr(), f, err)
		}
	}
	if !ic.c.Caps().Has(imap.CapIdle) && s.opts.Mode == "idle" {
		return fmt.Errorf("imap %s: the server has no IDLE; set mode: poll", s.opts.Server.addr())
	}
	return nil
}

// Run implements adapters.Source: one connection per folder, each
// syncing then waiting for new mail, reconnecting after any failure.
func (s *IMAPSource) Run(ctx context.Context, sink adapters.Sink) error {
	var wg sync.WaitGroup
	for _, f := range s.opts.Folders {
		wg.Add(1)
		go func(folder string) {
			defer wg.Done()
			s.watch(ctx, folder, sink)
		}(f)
	}
	wg.Wait()
	return nil
}

// SyncOnce runs one sync pass of every folder and returns (`courier
// fetch`).
func (s *IMAPSource) SyncOnce(ctx context.Context, sink adapters.Sink) error {
	for _, f := range s.opts.Folders {
		ic, err := s.connect(ctx)
		if err != nil {
			return err
		}
		err = s.syncFolder(ctx, ic, f, sink)
		ic.close()
		if err != nil {
			return err
		}
	}
	return nil
}

// watch keeps one folder in sync until ctx ends.
func (s *IMAPSource) watch(ctx context.Context, folder string, sink adapters.Sink) {
	log := s.log.With("folder", folder)
	backoff := time.Second
	for ctx.Err() == nil {
		err := s.session(ctx, folder, sink, func() { backoff = time.Second })
		if ctx.Err() != nil {
			return
		}
		s.Error(fmt.Errorf("%s: %w", folder, err))
		log.Warn("imap: connection lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// session is one connection's life: sync, then IDLE (or poll) and sync
// again on news, until an error.
func (s *IMAPSource) session(ctx context.Context, folder string, sink adapters.Sink, synced func()) error {
	ic, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer ic.close()
	idle := s.opts.Mode != "poll" && ic.c.Caps().Has(imap.CapIdle)
	if s.opts.Mode != "poll" && !idle {
		s.log.Warn("imap: the server has no IDLE; polling instead", "every", s.opts.PollInterval)
	}
	for {
		if err := s.syncFolder(ctx, ic, folder, sink); err != nil {
			return err
		}
		synced()
		detail := "idle"
		if !idle {
			detail = "polling every " + s.opts.PollInterval.String()
		}
		s.Set(adapters.StatusConnected, detail)
		if !idle {
			ic.clearDeadline() // the connection is silent until the next poll
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(s.opts.PollInterval):
			}
			continue
		}
		if err := s.idle(ctx, ic); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// idle waits in IDLE until the server reports news, the heartbeat is due,
// or ctx ends; then it leaves IDLE and checks the connection with a NOOP.
// (go-imap re-issues IDLE every 28 minutes by itself, before servers'
// 29-minute limit.)
func (s *IMAPSource) idle(ctx context.Context, ic *imapConn) error {
	// The server's "+ idling" is awaited within Timeout; then the
	// connection may be silent until the heartbeat.
	ic.deadline(s.opts.Timeout)
	cmd, err := ic.c.Idle()
	if err != nil {
		return fmt.Errorf("IDLE: %w", err)
	}
	ic.clearDeadline()
	select {
	case <-ic.updates:
	case <-time.After(s.opts.Heartbeat):
	case <-ctx.Done():
	case <-ic.c.Closed():
	}
	ic.deadline(s.opts.Timeout)
	if err := cmd.Close(); err != nil {
		return fmt.Errorf("leave IDLE: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("IDLE: %w", err)
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := ic.c.Noop().Wait(); err != nil {
		return fmt.Errorf("NOOP: %w", err)
	}
	return nil
}

// checkpointKey is where a folder's position is saved.
func (s *IMAPSource) checkpointKey(folder string) string {
	return "imap/" + s.opts.Account + "/" + folder
}

// syncFolder ingests everything new in a folder since its checkpoint.
func (s *IMAPSource) syncFolder(ctx context.Context, ic *imapConn, folder string, sink adapters.Sink) error {
	log := s.log.With("folder", folder)
	ic.deadline(s.opts.Timeout)
	readOnly := !s.opts.MarkSeen && s.opts.MoveTo == ""
	sel, err := ic.c.Select(folder, &imap.SelectOptions{ReadOnly: readOnly}).Wait()
	if err != nil {
		return fmt.Errorf("select %q: %w", folder, err)
	}
	key := s.checkpointKey(folder)
	var validity uint32
	var last imap.UID
	if v, ok, err := sink.Checkpoint(ctx, key); err != nil {
		return err
	} else if ok {
		a, b, _ := strings.Cut(v, ":")
		vv, _ := strconv.ParseUint(a, 10, 32)
		uu, _ := strconv.ParseUint(b, 10, 32)
		validity, last = uint32(vv), imap.UID(uu)
	}
	if validity != 0 && validity != sel.UIDValidity {
		log.Warn("imap: UIDVALIDITY changed; syncing the folder again (messages already in the mailbox are not written twice)",
			"was", validity, "now", sel.UIDValidity)
		last = 0
	}
	cp := func(uid imap.UID) *adapters.Checkpoint {
		return &adapters.Checkpoint{Key: key, Value: fmt.Sprintf("%d:%d", sel.UIDValidity, uid)}
	}
	if sel.NumMessages == 0 {
		if validity != sel.UIDValidity {
			ic.clearDeadline() // the server has nothing to say while the sink writes
			return sink.Deliver(ctx, adapters.Event{Checkpoint: cp(last)})
		}
		return nil
	}
	crit := &imap.SearchCriteria{UID: []imap.UIDSet{{imap.UIDRange{Start: last + 1, Stop: 0}}}}
	if last == 0 && !s.opts.Since.IsZero() {
		crit.Since = s.opts.Since
	}
	res, err := ic.c.UIDSearch(crit, nil).Wait()
	if err != nil {
		return fmt.Errorf("search %q: %w", folder, err)
	}
	var uids []imap.UID
	for _, u := range res.AllUIDs() {
		if u > last { // "n:*" always matches the last message
			uids = append(uids, u)
		}
	}
	slices.Sort(uids)
	if len(uids) == 0 {
		if validity != sel.UIDValidity {
			ic.clearDeadline()
			return sink.Deliver(ctx, adapters.Event{Checkpoint: cp(last)})
		}
		return nil
	}
	prog := newProgress(s.opts.Progress, s.opts.Account+" "+folder, len(uids))
	defer prog.finish()
	// One chunk is made durable while the next is fetched: the fsyncs of
	// chunk k overlap the network and parsing of chunk k+1. Deliveries stay
	// in order, so checkpoints still move only after their files.
	var pend *pendingChunk
	wait := func() error {
		if pend == nil {
			return nil
		}
		ic.clearDeadline() // the connection is rightly quiet meanwhile
		err := <-pend.errc
		done := pend.done
		pend = nil
		if err != nil {
			return err
		}
		s.after(ic, done)
		return nil
	}
	for i := 0; i < len(uids); i += s.opts.Chunk {
		chunk := uids[i:min(i+s.opts.Chunk, len(uids))]
		c, err := s.fetchChunk(ctx, ic, folder, sel.UIDValidity, chunk, sink)
		if err != nil {
			wait()
			return err
		}
		if err := wait(); err != nil {
			c.batch.Abort()
			return err
		}
		pend = &pendingChunk{errc: make(chan error, 1), done: c.done}
		go func(c *fetched, errc chan<- error, cp *adapters.Checkpoint) {
			errc <- c.commit(ctx, sink, cp)
		}(c, pend.errc, cp(chunk[len(chunk)-1]))
		prog.add(len(chunk))
		s.Event()
	}
	return wait()
}

// pendingChunk is a chunk being made durable.
type pendingChunk struct {
	errc chan error
	done []imap.UID
}

// fetched is a chunk read from the server: its events, the dropzone batch
// holding their raw messages and attachments, and the UIDs the mailbox
// holds once it is delivered.
type fetched struct {
	events []adapters.Event
	batch  *dropzone.Batch
	done   []imap.UID
}

// commit makes the chunk durable: the dropzone batch, then the messages and
// the checkpoint, which goes last so that it moves only once all are.
func (c *fetched) commit(ctx context.Context, sink adapters.Sink, cp *adapters.Checkpoint) error {
	if err := c.batch.Commit(); err != nil {
		c.batch.Abort()
		return err
	}
	return sink.Deliver(ctx, append(c.events, adapters.Event{Checkpoint: cp})...)
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
// the caller commits it.
func (s *IMAPSource) fetchChunk(ctx context.Context, ic *imapConn, folder string, validity uint32, uids []imap.UID, sink adapters.Sink) (*fetched, error) {
	ic.deadline(s.opts.Timeout)
	// First the envelopes: what the mailbox already holds (a re-sync after
	// a UIDVALIDITY change, mail in two folders, mail we sent) is not
	// fetched again.
	var want imap.UIDSet
	sizes := map[imap.UID]int64{}
	envs, err := ic.c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, Envelope: true, RFC822Size: true}).Collect()
	if err != nil {
		return nil, fmt.Errorf("fetch envelopes: %w", err)
	}
	// done are the messages the mailbox holds once the chunk is
	// delivered: MarkSeen and MoveTo apply to them, a second copy of a
	// message already ingested included (else it would stay unseen in
	// the folder for ever).
	var done []imap.UID
	for _, m := range envs {
		if m.Envelope != nil && m.Envelope.MessageID != "" {
			if seen, err := sink.Seen(ctx, threading.EmailID(m.Envelope.MessageID)); err != nil {
				return nil, err
			} else if seen {
				done = append(done, m.UID)
				continue
			}
		}
		want.AddNum(m.UID)
		sizes[m.UID] = m.RFC822Size
	}
	var events []adapters.Event
	batch := s.opts.Dropzone.NewBatch()
	if len(want) > 0 {
		full := &imap.FetchItemBodySection{Peek: true}
		header := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader}
		var small, large imap.UIDSet
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
		for _, set := range []struct {
			uids    imap.UIDSet
			section *imap.FetchItemBodySection
		}{{small, full}, {large, header}} {
			if len(set.uids) == 0 {
				continue
			}
			ic.deadline(s.opts.Timeout)
			cmd := ic.c.Fetch(set.uids, &imap.FetchOptions{UID: true, InternalDate: true, BodySection: []*imap.FetchItemBodySection{set.section}})
			// Messages are read off the connection in order and
			// normalised by workers, one per CPU.
			pool := newNormalisePool(func(fm *fetchedMessage) (*schema.Message, error) {
				return s.normalise(fm, batch, folder, validity, sizes)
			})
			var readErr error
			for {
				msg := cmd.Next()
				if msg == nil {
					break
				}
				fm, err := s.readMessage(msg, batch, set.section == header)
				if err != nil {
					readErr = err
					break
				}
				if fm != nil {
					pool.add(fm)
				}
				ic.deadline(s.opts.Timeout)
			}
			results, err := pool.wait()
			if readErr != nil || err != nil {
				cmd.Close()
				batch.Abort()
				return nil, errors.Join(readErr, err)
			}
			for _, r := range results {
				events = append(events, adapters.Event{Message: r.m})
				done = append(done, r.uid)
			}
			if err := cmd.Close(); err != nil {
				batch.Abort()
				return nil, fmt.Errorf("fetch: %w", err)
			}
		}
	}
	return &fetched{events: events, batch: batch, done: done}, nil
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
				b, err := io.ReadAll(it.Literal)
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
		s.log.Warn("imap: the server sent no body for a message", "uid", fm.uid)
		return nil, nil
	}
	if fm.internal.IsZero() {
		fm.internal = time.Now()
	}
	return fm, nil
}

// normalise stores a fetched message's raw form (if not yet stored) and
// makes the protocol message of it. It is safe to run on several messages
// at once: a Batch takes concurrent Puts.
func (s *IMAPSource) normalise(fm *fetchedMessage, batch *dropzone.Batch, folder string, validity uint32, sizes map[imap.UID]int64) (*schema.Message, error) {
	var r io.Reader
	if fm.mem != nil {
		obj, err := batch.Put(bytes.NewReader(fm.mem))
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
		UID: uint32(fm.uid), UIDValidity: validity, MaxArtifact: s.opts.MaxArtifact,
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
	}
	return m, nil
}

// imapConn is a logged-in connection.
type imapConn struct {
	c       *imapclient.Client
	raw     *watchdogConn
	updates chan struct{}
	stop    func() bool
}

// deadline arms the connection's watchdog: from now on it is closed when
// it makes no progress for d (see watchdogConn).
func (ic *imapConn) deadline(d time.Duration) { ic.raw.arm(d) }

// clearDeadline disarms it, while the connection is rightly silent (IDLE,
// between polls, while the sink writes).
func (ic *imapConn) clearDeadline() { ic.raw.arm(0) }

// watchdogConn bounds the connection's silence by the source's own
// Timeout, on top of the deadlines go-imap sets itself. go-imap's client
// sets a 30 s read deadline for each response (5 min inside a literal) and
// clears it after each response, so a deadline set on the raw connection
// lasts only until the next response: a connection that goes silent after
// that (a dead peer whose TCP stack still answers, a NAT that dropped its
// mapping) would hang a command forever, and a server that accepts but
// never greets would hold the connect for 30 s whatever the Timeout. Here
// every read and write deadline go-imap asks for is capped by ours, and
// ours moves on whenever bytes pass, so a large message on a slow link is
// not cut, only a stalled connection.
type watchdogConn struct {
	net.Conn
	mu     sync.Mutex
	limit  time.Duration // 0: disarmed
	until  time.Time     // now + limit at the last progress
	rd, wd time.Time     // the deadlines go-imap asked for
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// apply sets the effective deadlines; w.mu is held.
func (w *watchdogConn) apply() error {
	err := w.Conn.SetReadDeadline(earliest(w.rd, w.until))
	if err2 := w.Conn.SetWriteDeadline(earliest(w.wd, w.until)); err == nil {
		err = err2
	}
	return err
}

func (w *watchdogConn) arm(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.limit, w.until = d, time.Time{}
	if d > 0 {
		w.until = time.Now().Add(d)
	}
	w.apply()
}

// progress pushes the watchdog's deadline on after bytes passed.
func (w *watchdogConn) progress() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.limit > 0 {
		w.until = time.Now().Add(w.limit)
		w.apply()
	}
}

func (w *watchdogConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 {
		w.progress()
	}
	return n, err
}

func (w *watchdogConn) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	if n > 0 {
		w.progress()
	}
	return n, err
}

func (w *watchdogConn) SetDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rd, w.wd = t, t
	return w.apply()
}

func (w *watchdogConn) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rd = t
	return w.Conn.SetReadDeadline(earliest(w.rd, w.until))
}

func (w *watchdogConn) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wd = t
	return w.Conn.SetWriteDeadline(earliest(w.wd, w.until))
}

func (ic *imapConn) close() {
	ic.deadline(5 * time.Second)
	ic.c.Logout().Wait()
	ic.c.Close()
	ic.stop()
}

// errAuth marks a login the server refused.
var errAuth = errors.New("authentication failed")

// connect dials, starts TLS as configured and logs in. The connection is
// closed when ctx ends.
func (s *IMAPSource) connect(ctx context.Context) (*imapConn, error) {
	srv := s.opts.Server
	d := &net.Dialer{Timeout: s.opts.Timeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", srv.addr())
	if err != nil {
		return nil, fmt.Errorf("imap %s: %w", srv.addr(), err)
	}
	// TLS, the greeting and the login are bounded by Timeout too.
	raw := &watchdogConn{Conn: nc}
	raw.arm(s.opts.Timeout)
	ic := &imapConn{raw: raw, updates: make(chan struct{}, 1)}
	opts := &imapclient.Options{
		TLSConfig: srv.tlsConfig(),
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(data *imapclient.UnilateralDataMailbox) {
				if data.NumMessages != nil {
					select {
					case ic.updates <- struct{}{}:
					default:
					}
				}
			},
		},
	}
	var conn net.Conn = raw
	switch srv.TLS {
	case "implicit":
		tc := tls.Client(raw, srv.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("imap %s: TLS: %w", srv.addr(), err)
		}
		conn = tc
		ic.c = imapclient.New(conn, opts)
	case "starttls":
		if ic.c, err = imapclient.NewStartTLS(conn, opts); err != nil {
			raw.Close()
			return nil, fmt.Errorf("imap %s: STARTTLS: %w", srv.addr(), err)
		}
	default:
		ic.c = imapclient.New(conn, opts)
	}
	ic.stop = context.AfterFunc(ctx, func() { ic.c.Close() })
	fail := func(err error) (*imapConn, error) {
		ic.c.Close()
		ic.stop()
		return nil, err
	}
	if err := ic.c.WaitGreeting(); err != nil {
		return fail(fmt.Errorf("imap %s: greeting: %w", srv.addr(), err))
	}
	if srv.Auth == "login" || !ic.c.Caps().Has(imap.AuthCap(sasl.Plain)) {
		err = ic.c.Login(srv.Username, srv.Password).Wait()
	} else {
		err = ic.c.Authenticate(sasl.NewPlainClient("", srv.Username, srv.Password))
	}
	if err != nil {
		var ie *imap.Error
		// NO [UNAVAILABLE] is the server's own trouble (RFC 5530: its
		// authentication backend is down), worth retrying: not a bad
		// password, which fails the service's start.
		if errors.As(err, &ie) && ie.Code != imap.ResponseCodeUnavailable {
			return fail(fmt.Errorf("imap %s: %w as %s: %s (check the account's imap username and password)", srv.addr(), errAuth, srv.Username, ie.Text))
		}
		return fail(fmt.Errorf("imap %s: login: %w", srv.addr(), err))
	}
	return ic, nil
}

// appendSent copies a sent message to the Sent folder (IMAP APPEND).
func appendSent(ctx context.Context, srv Server, folder string, write func(io.Writer) error, timeout time.Duration) error {
	var n countWriter
	if err := write(&n); err != nil {
		return err
	}
	s := NewIMAPSource(IMAPOptions{Server: srv, Timeout: timeout})
	ic, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer ic.close()
	if folder == "" {
		folder = "Sent"
	}
	cmd := ic.c.Append(folder, int64(n), &imap.AppendOptions{Flags: []imap.Flag{imap.FlagSeen}, Time: time.Now()})
	if err := write(cmd); err != nil {
		cmd.Close()
		return err
	}
	if err := cmd.Close(); err != nil {
		return err
	}
	_, err = cmd.Wait()
	return err
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// progress prints backfill progress on a terminal: done/total and rate.
type progress struct {
	w          io.Writer
	label      string
	total, n   int
	start, out time.Time
}

func newProgress(w io.Writer, label string, total int) *progress {
	return &progress{w: w, label: label, total: total, start: time.Now()}
}

func (p *progress) add(k int) {
	p.n += k
	if p.w == nil || time.Since(p.out) < 200*time.Millisecond && p.n < p.total {
		return
	}
	p.out = time.Now()
	rate := float64(p.n) / time.Since(p.start).Seconds()
	fmt.Fprintf(p.w, "\r%s: %d/%d messages (%.0f/s)   ", p.label, p.n, p.total, rate)
}

func (p *progress) finish() {
	if p.w != nil && p.n > 0 {
		fmt.Fprintln(p.w)
	}
}

// normalisePool normalises fetched messages on one worker per CPU and gives
// the results back in the order the messages came.
type normalisePool struct {
	jobs    chan int
	fms     []*fetchedMessage
	results []normalised
	mu      sync.Mutex
	wg      sync.WaitGroup
	fn      func(*fetchedMessage) (*schema.Message, error)
	err     error
}

type normalised struct {
	uid imap.UID
	m   *schema.Message
}

func newNormalisePool(fn func(*fetchedMessage) (*schema.Message, error)) *normalisePool {
	p := &normalisePool{jobs: make(chan int, 64), fn: fn}
	for i := 0; i < runtime.GOMAXPROCS(0); i++ {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

func (p *normalisePool) add(fm *fetchedMessage) {
	p.mu.Lock()
	i := len(p.fms)
	p.fms = append(p.fms, fm)
	p.results = append(p.results, normalised{})
	p.mu.Unlock()
	p.jobs <- i
}

func (p *normalisePool) work() {
	defer p.wg.Done()
	for i := range p.jobs {
		p.mu.Lock()
		fm := p.fms[i]
		p.mu.Unlock()
		m, err := p.fn(fm)
		p.mu.Lock()
		if err != nil && p.err == nil {
			p.err = err
		}
		p.results[i] = normalised{uid: fm.uid, m: m}
		p.fms[i] = nil // its raw bytes can go
		p.mu.Unlock()
	}
}

// wait returns the results in order, or the first error.
func (p *normalisePool) wait() ([]normalised, error) {
	close(p.jobs)
	p.wg.Wait()
	return p.results, p.err
}

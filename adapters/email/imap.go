package email

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
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
	// Bounds bound the text a message file keeps and how many messages
	// normalise at once, shared with the provider's other sources.
	Bounds *Bounds
	Logger *slog.Logger
	// Verifier checks who sent each message (metadata.extra.auth).
	Verifier *Verifier
	// DedupeWindow is how far apart two identical mails without a
	// Message-ID, by INTERNALDATE, may be and still be one message
	// (default DefaultDedupeWindow).
	DedupeWindow time.Duration
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

// Start checks the account: a login the server refuses is an error
// marked adapters.Refused (the service starts without the Source, shows
// why on /health and tries it again minutes later); an unreachable server
// only warns (Run keeps trying).
func (s *IMAPSource) Start(ctx context.Context) error {
	ic, err := s.connect(ctx)
	if err != nil {
		if adapters.IsRefused(err) {
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
// syncing then waiting for new mail, reconnecting after a failure. A login
// the server refuses ends Run with it (adapters.Refused): the service
// tries again minutes later, rather than every folder every minute.
func (s *IMAPSource) Run(ctx context.Context, sink adapters.Sink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		once    sync.Once
		refused error
	)
	for _, f := range s.opts.Folders {
		wg.Go(func() {
			if err := s.watch(ctx, f, sink); err != nil {
				once.Do(func() { refused = err; cancel() })
			}
		})
	}
	wg.Wait()
	return refused
}

// FetchOnce implements adapters.Fetcher: one sync pass (`courier fetch`).
func (s *IMAPSource) FetchOnce(ctx context.Context, sink adapters.Sink) error {
	return s.SyncOnce(ctx, sink)
}

// SyncOnce runs one sync pass of every folder and returns.
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

// watch keeps one folder in sync until ctx ends (nil), or until the
// server refuses the login (that error).
func (s *IMAPSource) watch(ctx context.Context, folder string, sink adapters.Sink) error {
	log := s.log.With("folder", folder)
	backoff := time.Second
	for ctx.Err() == nil {
		err := s.session(ctx, folder, sink, func() { backoff = time.Second })
		if ctx.Err() != nil {
			return nil
		}
		if adapters.IsRefused(err) {
			return err
		}
		s.Error(fmt.Errorf("%s: %w", folder, err))
		log.Warn("imap: connection lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
	return nil
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

package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/notify"
)

// What a reload (SIGHUP, `courier reload`) can change in the running
// service: each provider restarted alone with its new build (lane.go),
// and the notify hooks. cmd/courier decides what a new config changes
// (config.Diff) and calls these.

// ErrNotLive is returned by RestartProvider for a provider the running
// service cannot replace live: one enabled or disabled by the new config,
// or one that gained or lost a way to send, a health or a webhook.
var ErrNotLive = errors.New("the provider's shape changed")

// Fits reports whether p can replace the running provider of its name
// live (RestartProvider); when not, only a restart of the service runs it.
func (s *Service) Fits(p *adapters.Provider) bool {
	l := s.lanes[string(p.Name)]
	return l != nil && l.fits(p)
}

// RestartProvider replaces the running provider of p's name by p, the
// other providers running on: its sources are stopped and p's started,
// and the outbound engine, /health and its webhook reach p from then on.
// Sends in flight finish with the provider they began with.
func (s *Service) RestartProvider(ctx context.Context, p *adapters.Provider) error {
	if !s.Fits(p) {
		return ErrNotLive
	}
	l := s.lanes[string(p.Name)]
	s.secrets.Add(p.Secrets...)
	if d, ok := s.sink.(*deadLetterSink); ok {
		d.secrets.Add(p.Secrets...)
	}
	return l.replace(ctx, p)
}

// ReloadHooks stops the hooks and starts cfg's. What each hook has queued
// stays in the database: a hook kept by name goes on with its queue.
func (s *Service) ReloadHooks(ctx context.Context, cfg *config.Config) error {
	return s.hooks.replace(ctx, notifyHooks(cfg))
}

// Reload is the outcome of the last reload, on /health.
type Reload struct {
	// Count is the reloads asked for since the service started; `courier
	// reload` waits for it to grow.
	Count   int       `json:"count"`
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"` // applied | refused
	Error   string    `json:"error,omitempty"`
	// Applied and NeedsRestart name the changed keys.
	Applied      []string `json:"applied,omitempty"`
	NeedsRestart []string `json:"needs_restart,omitempty"`
}

// ConfigState is the config the service runs: its file and the SHA-256
// of the file's bytes, which doctor compares with the file's.
type ConfigState struct {
	Path string `json:"path,omitempty"`
	Hash string `json:"hash,omitempty"`
}

// SetConfig records the config the service runs now.
func (s *Service) SetConfig(c ConfigState) {
	s.mu.Lock()
	s.config = c
	s.mu.Unlock()
}

// Reloaded records the outcome of a reload (counted by the caller).
func (s *Service) Reloaded(r Reload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reload = r
}

// reloadState fills the report's config and reload.
func (s *Service) reloadState(r *Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.config != (ConfigState{}) {
		c := s.config
		r.Config = &c
	}
	if s.reload.Count > 0 {
		rl := s.reload
		r.Reload = &rl
	}
}

// hooksSlot runs the notify hooks, and replaces them on a reload.
type hooksSlot struct {
	mb  *mailbox.Mailbox
	log *slog.Logger

	mu    sync.Mutex
	hooks []notify.Hook
	r     *notify.Runner
}

func (h *hooksSlot) component() Component {
	return Component{Name: "notify", Start: func(ctx context.Context) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.startLocked(ctx)
	}, Stop: func(ctx context.Context) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.stopLocked(ctx)
	}}
}

func (h *hooksSlot) startLocked(ctx context.Context) error {
	r := notify.New(h.mb, &notify.Options{Logger: h.log, Hooks: h.hooks, Root: h.mb.Root})
	if err := r.Start(ctx); err != nil {
		return err
	}
	h.r = r
	return nil
}

func (h *hooksSlot) stopLocked(ctx context.Context) error {
	if h.r == nil {
		return nil
	}
	err := h.r.Stop(ctx)
	h.r = nil
	return err
}

func (h *hooksSlot) replace(ctx context.Context, hooks []notify.Hook) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.stopLocked(ctx); err != nil {
		h.log.Warn("the hooks stopped with errors", "err", err)
	}
	h.hooks = hooks
	if err := h.startLocked(ctx); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

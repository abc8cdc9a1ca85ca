// Package service holds what `courier serve` is made of besides the
// adapters and the pipelines: the lifetime of its components (start in
// order, stop in reverse, roll back a failed start, as maddy's
// framework/container/lifetime.go does); Assemble, which makes the
// service of a set of providers (ingest, outbound, the notify hooks, the
// HTTP server, a component per source); the restart loop of a source
// (source.go: a failed one restarted after a backoff, one whose provider
// refused the credentials left out of the start and tried again slowly,
// so that one provider's failure never stops the others); the HTTP server and its limits (HTTPComponent); the
// health report and the Prometheus metrics; systemd's watchdog; and the
// log Redactor. cmd/courier wires it, with the agents' socket and /mcp.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Component is a part of the service with a lifecycle.
type Component struct {
	Name  string
	Start func(ctx context.Context) error
	Stop  func(ctx context.Context) error
}

// Lifetime starts components in the order they were added and stops them in
// reverse.
type Lifetime struct {
	log        *slog.Logger
	components []Component
	started    []Component
}

// NewLifetime returns an empty Lifetime.
func NewLifetime(log *slog.Logger) *Lifetime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Lifetime{log: log}
}

// Add appends a component.
func (l *Lifetime) Add(c Component) { l.components = append(l.components, c) }

// Start starts every component in order. When one fails, the ones already
// started are stopped, in reverse, and the error names the one that failed.
func (l *Lifetime) Start(ctx context.Context) error {
	for _, c := range l.components {
		if c.Start != nil {
			l.log.Debug("starting", "component", c.Name)
			if err := c.Start(ctx); err != nil {
				err = fmt.Errorf("%s: %w", c.Name, err)
				if serr := l.Stop(context.WithoutCancel(ctx)); serr != nil {
					err = errors.Join(err, fmt.Errorf("while rolling back: %w", serr))
				}
				return err
			}
		}
		l.started = append(l.started, c)
	}
	return nil
}

// Stop stops the started components in reverse order; every one is asked
// to stop even when an earlier one fails.
func (l *Lifetime) Stop(ctx context.Context) error {
	var errs []error
	for i := len(l.started) - 1; i >= 0; i-- {
		c := l.started[i]
		if c.Stop == nil {
			continue
		}
		l.log.Debug("stopping", "component", c.Name)
		if err := c.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
		}
	}
	l.started = nil
	return errors.Join(errs...)
}

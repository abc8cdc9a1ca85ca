package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/monoco/courier/mailbox"
)

// Watchdog answers systemd's watchdog (WATCHDOG_USEC) while the state
// database answers; it does nothing when systemd asked for none. stop
// ends it.
func Watchdog(ctx context.Context, mb *mailbox.Mailbox, log *slog.Logger) (stop func()) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, interval/3)
				err := mb.Ping(pctx)
				pcancel()
				if err != nil {
					log.Error("watchdog: state database does not answer; not petting the watchdog", "err", err)
					continue
				}
				daemon.SdNotify(false, daemon.SdNotifyWatchdog)
			}
		}
	}()
	return func() { cancel(); <-done }
}

package daemon

import (
	"context"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
)

// ReloadPath is where the service of the workspace at root writes the
// outcome of its last reload, for `courier reload` to read whatever the
// reload changed (the HTTP address among them).
func ReloadPath(root string) string {
	return filepath.Join(mailbox.Layout{Root: root}.State(), "courier.reload")
}

// WriteReloadFile writes the outcome of a reload (JSON) to ReloadPath.
func WriteReloadFile(root string, data []byte) error {
	return writeFile(ReloadPath(root), data)
}

// Reloaded is what Reload did.
type Reloaded struct {
	// Systemd: systemctl reload asked it (the unit's ExecReload sends
	// SIGHUP).
	Systemd bool
	PID     int
}

// Reload asks the workspace's service to re-read its config: SIGHUP to
// the serve that holds the workspace, found as Stop finds it, or
// systemctl reload under systemd. It does not wait for the outcome: the
// service tells it on /health (courier reload waits for it there).
func (d *Daemon) Reload(ctx context.Context) (*Reloaded, error) {
	if u, ok, err := d.SystemdUnit(ctx); err != nil {
		return nil, err
	} else if ok {
		return &Reloaded{Systemd: true}, d.Systemctl(ctx, u, "reload")
	}
	r, err := d.serving()
	if err != nil {
		return nil, err
	}
	switch err := unix.Kill(r.pid, unix.SIGHUP); {
	case errors.Is(err, unix.EPERM):
		return nil, fault.Errorf(fault.NoPermission, "the service (pid %d) runs as another user: reload it as that user (or through systemd, courier.systemd.unit)", r.pid)
	case errors.Is(err, unix.ESRCH):
		return nil, fault.Wrap(fault.NoService, errors.New("the service is not running (it stopped just now)"))
	case err != nil:
		return nil, err
	}
	return &Reloaded{PID: r.pid}, nil
}

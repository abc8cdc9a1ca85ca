package agents

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
)

// route decides how a writing verb of the command line writes. It returns
// a client of the service when the service's socket at path answers; nil
// when no service answers and the verb may act on the mailbox of root
// itself; or an error saying why it can do neither. writes is false for a
// verb that only reads the mailbox without the service (send --dry-run).
func route(ctx context.Context, path, root string, writes bool) (*agentapi.Client, error) {
	c, err := agentapi.Dial(ctx, path)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, fs.ErrPermission) {
		// A writing verb must not fall back to writing directly while the
		// service runs; this user would not be allowed to anyway.
		u, g := UserName(), GroupOf(path)
		return nil, fault.Errorf(fault.NoPermission, "cannot reach the service at %s: permission denied. While the service runs, writing verbs go through its socket: user %s must be in group %s "+
			"(usermod -aG %s %s, then log in again)", path, u, g, g, u)
	}
	if !writes {
		return nil, nil
	}
	// No service answers. Acting directly needs write access to the
	// database, its WAL and the staging folder; find out before the first
	// write rather than fail halfway.
	if p, ok := Unwritable(root); !ok {
		return nil, fault.Errorf(fault.NoService, "the service is not running (nothing answers on %s), and user %s may not write the mailbox itself (%s): "+
			"start the service (systemctl start courier), or run this as the user that owns the workspace", path, UserName(), p)
	}
	return nil, nil
}

// serviceError is what the service answered, as an error of its kind: a
// refusal is exactly what acting directly would have given; a service that
// could not be asked is Unavailable.
func serviceError(err error) error {
	var e *agentapi.Error
	if errors.As(err, &e) {
		return fault.Wrap(fault.OfExitCode(e.Code), errors.New(e.Message))
	}
	return fault.Wrap(fault.Unavailable, err)
}

// Unwritable returns the first file or folder of the workspace at root
// that acting on its mailbox directly would write and this user may not,
// and ok false; ok is true when there is none.
func Unwritable(root string) (path string, ok bool) {
	l := mailbox.Layout{Root: root}
	for _, p := range []string{l.State(), l.DB(), l.DB() + "-wal", l.DB() + "-shm", l.Tmp()} {
		err := unix.Access(p, unix.W_OK)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Sprintf("%s: %v", p, err), false
		}
	}
	return "", true
}

// ReadOnly reports whether this user may only read the mailbox of root:
// its database exists and may not be written. Such a user is an agent in
// the workspace's group of a mailbox only the service writes.
func ReadOnly(root string) bool {
	db := mailbox.Layout{Root: root}.DB()
	if _, err := os.Stat(db); err != nil {
		return false
	}
	_, ok := Unwritable(root)
	return !ok
}

// UserName is the name of the user running this process.
func UserName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid" + strconv.Itoa(os.Getuid())
}

// GroupOf names the group of path, or of the nearest folder above it this
// user may look at: the group whose members may use it.
func GroupOf(path string) string {
	for p := path; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			gid := fi.Sys().(*syscall.Stat_t).Gid
			if g, err := user.LookupGroupId(strconv.Itoa(int(gid))); err == nil {
				return g.Name
			}
			return strconv.Itoa(int(gid))
		}
		if filepath.Dir(p) == p {
			return "(unknown)"
		}
	}
}

package fault

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// The exit codes agents and scripts rely on (docs/agents.md, `courier --help`).
func TestExitCodes(t *testing.T) {
	for k, want := range map[Kind]int{
		NotFound: 1, Conflict: 2, NoService: 3, Timeout: 4, Usage: 64, Invalid: 65, NoInput: 66,
		Unavailable: 69, Internal: 70, CantCreate: 73, IO: 74, NoPermission: 77, Config: 78,
	} {
		if got := k.ExitCode(); got != want {
			t.Errorf("kind %d: exit %d, want %d", k, got, want)
		}
		if back := OfExitCode(want); back != k {
			t.Errorf("OfExitCode(%d) = %d, want %d", want, back, k)
		}
	}
	if OfExitCode(99) != Internal || Kind(99).ExitCode() != 70 {
		t.Error("an unknown code or kind is not Internal")
	}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Kind
	}{
		{&mailbox.NotFoundError{ID: "x"}, NotFound},
		{fmt.Errorf("open: %w", dropzone.ErrNotFound), NotFound},
		{&mailbox.ConflictError{Status: mailbox.StatusClaimed}, Conflict},
		{mailbox.ErrBusy, Timeout},
		{schema.Errors{{Path: "to", Msg: "missing"}}, Invalid},
		{dropzone.ErrTooLarge, Invalid},
		{dropzone.ErrInvalidID, Invalid},
		{mailbox.ErrUnsafePath, Invalid},
		{mailbox.ErrNotInitialized, NoInput},
		{&os.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}, NoInput},
		{&os.PathError{Op: "open", Path: "x", Err: fs.ErrPermission}, CantCreate},
		{&os.PathError{Op: "read", Path: "x", Err: errors.New("EIO")}, IO},
		{errors.New("what"), Internal},
		// A kind given wins over the sentinels it wraps.
		{Wrap(Usage, mailbox.ErrNotFound), Usage},
		{fmt.Errorf("outer: %w", Errorf(Config, "bad key")), Config},
	} {
		if got := KindOf(c.err); got != c.want {
			t.Errorf("KindOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if Wrap(Usage, nil) != nil || ExitCode(nil) != 0 {
		t.Error("nil is not an error")
	}
	if !Given(fmt.Errorf("x: %w", Wrap(IO, errors.New("y")))) || Given(mailbox.ErrBusy) {
		t.Error("Given")
	}
}

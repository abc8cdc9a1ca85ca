// Package fault names the kinds of failure Courier's library packages
// report (not found, a conflict with the holder of a claim, invalid input,
// the service unavailable, the database busy, a usage mistake...) and holds
// the one table that turns a kind into an exit code.
//
// Library packages (agents, mailview, daemon, mcpserver) return errors
// that carry a Kind (Wrap, Errorf) or that KindOf recognises (the
// sentinels of mailbox, dropzone and schema, fs.ErrNotExist...); they never
// hold a number. The numbers are upstream's exit codes (1 not found, 2
// conflict, 3 service needed but not running, 4 timeout) and sysexits(3)
// for the rest, and three parties show the same one for the same failure:
// the command line exits with it; the agents' socket carries it on its
// wire (agentapi.Outcome.Code, agentapi.Error.Code, fixed since agents
// of an older command line talk to it); and the MCP server puts it in its
// results ("... (exit 2)" and exit_code), which agents match on. So the
// table is here, once, rather than in cmd/courier: the command line
// (ExitCode) and the MCP server use the same function, and a code read
// off the socket is turned back into its Kind by OfExitCode.
package fault

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Kind is a kind of failure.
type Kind int

const (
	// Internal is a failure no other kind describes: a bug, or an error
	// of a library Courier did not expect.
	Internal Kind = iota
	// NotFound: no message, draft, thread or object has that id.
	NotFound
	// Conflict: another agent holds the claim (or the message is done,
	// or waits to be retried), or another process holds the workspace.
	Conflict
	// NoService: the service is needed and is not running.
	NoService
	// Timeout: the state database stayed busy, or a wait ran out.
	Timeout
	// Usage: a mistake in how a command or tool was called.
	Usage
	// Invalid: invalid input data (a draft, a file, an artifact).
	Invalid
	// NoInput: a file or mailbox that is not there, or cannot be read.
	NoInput
	// Unavailable: a service Courier needs does not answer.
	Unavailable
	// CantCreate: a file or folder cannot be created.
	CantCreate
	// IO: an input or output error.
	IO
	// NoPermission: the service runs, but this user may not use it.
	NoPermission
	// Config: the configuration is wrong.
	Config
)

// exitCodes is the table: upstream's codes (1-4), then sysexits(3).
var exitCodes = [...]int{
	Internal:     70, // EX_SOFTWARE
	NotFound:     1,
	Conflict:     2,
	NoService:    3,
	Timeout:      4,
	Usage:        64, // EX_USAGE
	Invalid:      65, // EX_DATAERR
	NoInput:      66, // EX_NOINPUT
	Unavailable:  69, // EX_UNAVAILABLE
	CantCreate:   73, // EX_CANTCREAT
	IO:           74, // EX_IOERR
	NoPermission: 77, // EX_NOPERM
	Config:       78, // EX_CONFIG
}

// ExitCode is the exit code of the command line for k.
func (k Kind) ExitCode() int {
	if k < 0 || int(k) >= len(exitCodes) {
		return exitCodes[Internal]
	}
	return exitCodes[k]
}

// OfExitCode is the kind whose exit code is code (a code the service's
// socket answered with); Internal for one the table does not hold.
func OfExitCode(code int) Kind {
	for k, c := range exitCodes {
		if c == code {
			return Kind(k)
		}
	}
	return Internal
}

// Error is an error of a known kind.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Wrap gives err the kind k; nil stays nil.
func Wrap(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: k, Err: err}
}

// Errorf is fmt.Errorf of the kind k.
func Errorf(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Err: fmt.Errorf(format, args...)}
}

// KindOf tells the kind of err: the kind it was given (the outermost
// Error in its chain), else what its sentinels say.
func KindOf(err error) Kind {
	var fe *Error
	var errs schema.Errors
	var pe *os.PathError
	switch {
	case err == nil:
		return Internal
	case errors.As(err, &fe):
		return fe.Kind
	case errors.Is(err, mailbox.ErrNotFound), errors.Is(err, dropzone.ErrNotFound):
		return NotFound
	case errors.Is(err, mailbox.ErrConflict):
		return Conflict
	case errors.Is(err, mailbox.ErrBusy):
		return Timeout
	case errors.As(err, &errs), errors.Is(err, dropzone.ErrTooLarge), errors.Is(err, dropzone.ErrInvalidID),
		errors.Is(err, mailbox.ErrUnsafePath): // a link or a FIFO where a mailbox file should be
		return Invalid
	case errors.Is(err, mailbox.ErrNotInitialized), errors.Is(err, fs.ErrNotExist):
		return NoInput
	case errors.Is(err, fs.ErrPermission):
		return CantCreate
	case errors.As(err, &pe):
		return IO
	}
	return Internal
}

// Given reports whether err was given a kind (by Wrap, Errorf, or an
// Error of its own), rather than only recognised by KindOf.
func Given(err error) bool {
	var fe *Error
	return errors.As(err, &fe)
}

// ExitCode is the exit code of the command line for err: 0 for nil.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	return KindOf(err).ExitCode()
}

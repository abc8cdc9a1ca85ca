package main

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Exit codes: upstream's (1-4) and sysexits(3) for the rest.
const (
	exitOK          = 0
	exitNotFound    = 1
	exitConflict    = 2
	exitNoService   = 3
	exitTimeout     = 4
	exitUsage       = 64 // EX_USAGE
	exitDataErr     = 65 // EX_DATAERR: an invalid draft or file
	exitNoInput     = 66 // EX_NOINPUT
	exitUnavailable = 69 // EX_UNAVAILABLE
	exitSoftware    = 70 // EX_SOFTWARE
	exitCantCreat   = 73 // EX_CANTCREAT
	exitIOErr       = 74 // EX_IOERR
	exitConfig      = 78 // EX_CONFIG
)

// errPrefix starts every error and warning the command line prints, under
// whatever name the binary was invoked (courier, monoco, a renamed build):
// one style that scripts and agents can match.
const errPrefix = "courier: "

// exitError carries an exit code with an error. A silent one has already
// been reported.
type exitError struct {
	code   int
	err    error
	silent bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// exitCode maps an error to the exit code scripts rely on.
func exitCode(err error) int {
	var ee *exitError
	var errs schema.Errors
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, mailbox.ErrNotFound), errors.Is(err, dropzone.ErrNotFound):
		return exitNotFound
	case errors.Is(err, mailbox.ErrConflict):
		return exitConflict
	case errors.Is(err, mailbox.ErrBusy):
		return exitTimeout
	case errors.As(err, &errs), errors.Is(err, dropzone.ErrTooLarge), errors.Is(err, dropzone.ErrInvalidID),
		errors.Is(err, mailbox.ErrUnsafePath): // a link or a FIFO where a mailbox file should be
		return exitDataErr
	case errors.Is(err, mailbox.ErrNotInitialized):
		return exitNoInput
	case errors.Is(err, fs.ErrNotExist):
		return exitNoInput
	case errors.Is(err, fs.ErrPermission):
		return exitCantCreat
	case isUsage(err):
		return exitUsage
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return exitIOErr
	}
	return exitSoftware
}

// isUsage recognises cobra's and pflag's complaints about the command line.
func isUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "required flag", "if any flags in the group"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// usageError is a mistake on the command line.
func usageError(format string, args ...any) error {
	return withCode(exitUsage, errorf(format, args...))
}

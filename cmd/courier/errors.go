package main

import (
	"errors"
	"strings"

	"github.com/monoco/courier/internal/fault"
)

// errPrefix starts every error and warning the command line prints, under
// whatever name the binary was invoked (courier, monoco, a renamed build):
// one style that scripts and agents can match.
const errPrefix = "courier: "

// exitError is an exit code whose cause has already been reported (a
// command that printed its refusals as it went).
type exitError struct {
	code int
}

func (e *exitError) Error() string { return "" }

// silentExit is the exit of a failure of kind k already reported.
func silentExit(k fault.Kind) error { return &exitError{code: k.ExitCode()} }

// exitCode maps an error to the exit code scripts rely on: the table of
// package fault, and usage for what cobra and pflag say of the command
// line.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case !fault.Given(err) && isUsage(err):
		if k := fault.KindOf(err); k == fault.IO || k == fault.Internal {
			return fault.Usage.ExitCode()
		}
	}
	return fault.ExitCode(err)
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
	return fault.Errorf(fault.Usage, format, args...)
}

package main

import "github.com/monoco/courier/internal/fault"

// The exit codes the tests expect, by the one table (package fault).
var (
	exitNotFound    = fault.NotFound.ExitCode()
	exitConflict    = fault.Conflict.ExitCode()
	exitNoService   = fault.NoService.ExitCode()
	exitTimeout     = fault.Timeout.ExitCode()
	exitUsage       = fault.Usage.ExitCode()
	exitDataErr     = fault.Invalid.ExitCode()
	exitNoInput     = fault.NoInput.ExitCode()
	exitUnavailable = fault.Unavailable.ExitCode()
	exitNoPerm      = fault.NoPermission.ExitCode()
	exitConfig      = fault.Config.ExitCode()
)

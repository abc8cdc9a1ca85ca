//go:build linux

package testutil

import (
	"runtime"
	"syscall"
	"time"
)

// ThreadCPU runs f on one locked OS thread and returns the CPU time that
// thread spent in it (user + system, RUSAGE_THREAD). Unlike wall time it
// does not grow when other processes load the machine, so tests of how
// work scales with input size can compare it without flaking on a busy
// machine. Work f hands to other goroutines is not counted.
func ThreadCPU(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadRusage()
	f()
	return threadRusage() - before
}

func threadRusage() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

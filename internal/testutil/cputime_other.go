//go:build !linux

package testutil

import "time"

// ThreadCPU returns the wall time of f where a thread's CPU time cannot
// be read (it is only approximate on a loaded machine).
func ThreadCPU(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

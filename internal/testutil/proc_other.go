//go:build !unix

package testutil

import "os"

// killGroup kills pid (no process groups here).
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

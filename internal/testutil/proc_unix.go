//go:build unix

package testutil

import "syscall"

// killGroup sends SIGKILL to the process group led by pid, if pid leads
// one (a daemon that called setsid), else to pid alone.
func killGroup(pid int) {
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
		syscall.Kill(-pid, syscall.SIGKILL)
		return
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

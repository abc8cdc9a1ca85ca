//go:build unix

package testutil

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// groupProc is a server run in the foreground as the test's child, in a
// process group of its own, so that stop ends it and whatever it started
// (Postfix's master and daemons, Exim's daemon and deliveries).
type groupProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	output *Buffer
}

// startGroup starts bin with args and writes its pid to pidFile, for
// sweepStale should the test process die without cleaning up.
func startGroup(pidFile, bin string, args ...string) (*groupProc, error) {
	g := &groupProc{cmd: exec.Command(bin, args...), exited: make(chan struct{}), output: &Buffer{}}
	g.cmd.Stdout, g.cmd.Stderr = g.output, g.output
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { g.cmd.Wait(); close(g.exited) }()
	os.WriteFile(pidFile, []byte(strconv.Itoa(g.cmd.Process.Pid)), 0o644)
	return g, nil
}

// gone says whether the server has exited.
func (g *groupProc) gone() bool {
	select {
	case <-g.exited:
		return true
	default:
		return false
	}
}

// stop sends the group SIGTERM (Postfix's master and Exim's daemon end
// their children on it), then SIGKILL to what is left after 10 s.
func (g *groupProc) stop() {
	if g == nil {
		return
	}
	syscall.Kill(-g.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(10 * time.Second):
	}
	syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	<-g.exited
}

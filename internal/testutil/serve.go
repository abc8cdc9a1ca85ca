package testutil

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Serve is a `courier serve` process started by StartServe, for tests and
// benchmarks that drive the real binary (kill -9, SIGTERM, restarts).
type Serve struct {
	cmd  *exec.Cmd
	out  *Buffer
	done chan struct{}
	// Health is the URL of the service's /health endpoint.
	Health string
}

// StartServe runs bin with args (which include "serve"), waits until
// /health on httpAddr says the service started (started_at, set once every
// component runs: /health answers before the receivers listen), and kills
// the process in tb.Cleanup if it is still running. It fails tb if the
// service exits or has not started in 20 s, with everything the service
// printed.
func StartServe(tb testing.TB, bin, httpAddr string, args ...string) *Serve {
	tb.Helper()
	s := &Serve{out: &Buffer{}, done: make(chan struct{}), Health: "http://" + httpAddr + "/health"}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	tb.Cleanup(s.Kill)
	exited := false
	up := Poll(20*time.Second, func() bool {
		select {
		case <-s.done:
			exited = true
			return true
		default:
		}
		resp, err := http.Get(s.Health)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var rep struct {
			StartedAt *time.Time `json:"started_at"`
		}
		return json.NewDecoder(resp.Body).Decode(&rep) == nil && rep.StartedAt != nil
	})
	switch {
	case exited:
		tb.Fatalf("courier serve exited at start (%v):\n%s", s.cmd.ProcessState, s.Log())
	case !up:
		tb.Fatalf("courier serve did not say it started on /health:\n%s", s.Log())
	}
	return s
}

// Log is everything the service has printed so far.
func (s *Serve) Log() string { return s.out.String() }

// Kill ends the service with SIGKILL, a crash at an arbitrary instant, and
// waits for it. It does nothing if the service has already exited.
func (s *Serve) Kill() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.done
}

// Stop sends SIGTERM, as systemd does, waits up to 60 s and returns the
// exit code.
func (s *Serve) Stop(tb testing.TB) int {
	tb.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		tb.Fatalf("courier serve did not stop on SIGTERM:\n%s", s.Log())
	}
	return s.cmd.ProcessState.ExitCode()
}

package agentapi_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/testutil"
)

// nobody is the user the helper process claims as.
const nobody = 65534

// Issue 18, item 6: any agent user could hold all 64 connections of the
// socket for 5 minutes (a request's headers, then one byte of its body)
// and lock every other user's claim out. With one user holding 64, the
// claim of another (uid 65534, in a helper process) is served: under the
// per-user cap, and with the cap lifted, by taking the place of a
// connection that waits for its client.
func TestOneUserCannotLockOutAnother(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the other user's claim comes from a helper process run as uid 65534, which needs root")
	}
	t.Run("per-user cap", func(t *testing.T) { lockOut(t, nil, 16) })
	t.Run("eviction", func(t *testing.T) { lockOut(t, &agentapi.Options{MaxConnsPerUID: 64}, 64) })
}

// lockOut holds 64 connections as this process's user, waits until placed
// of them hold a place, and claims as uid 65534.
func lockOut(t *testing.T, opts *agentapi.Options, placed int) {
	dir := t.TempDir()
	// t.TempDir's folders are 0700: let uid 65534 reach the socket and
	// run the test binary.
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "courier.sock")
	claimed := make(chan uint32, 1)
	s := start(t, path, &backend{claim: func(c agentapi.Caller, req agentapi.ClaimRequest) agentapi.Outcome {
		claimed <- c.UID
		return agentapi.Outcome{Result: agentapi.Result{Success: true, MessageID: req.ID}}
	}}, opts)
	os.Chmod(path, 0o666)

	const held = 64
	for range held {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /v1/claim HTTP/1.1\r\nHost: courier\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	}
	testutil.WaitFor(t, 20*time.Second, "the held connections to take their places", func() bool {
		n, _ := s.Conns()
		return n >= placed
	})

	// The test binary, where uid 65534 may run it.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "agentapi.test")
	testutil.CopyFile(t, exe, bin, 0o755)
	// Well under the 5 minutes the held connections kept their places.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestHelperClaim$", "-test.v")
	cmd.Env = append(os.Environ(), "COURIER_TEST_CLAIM_SOCKET="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("uid %d's claim with %d connections held by uid %d: %v\n%s", nobody, held, os.Getuid(), err, out)
	}
	select {
	case uid := <-claimed:
		if uid != nobody {
			t.Errorf("the claim came from uid %d, want %d", uid, nobody)
		}
	default:
		t.Errorf("the helper succeeded but no claim reached the backend:\n%s", out)
	}
}

// TestHelperClaim is TestOneUserCannotLockOutAnother's helper process: it
// claims a message over the socket it is given, and fails if it cannot.
func TestHelperClaim(t *testing.T) {
	path := os.Getenv("COURIER_TEST_CLAIM_SOCKET")
	if path == "" {
		t.Skip("the helper process of TestOneUserCannotLockOutAnother")
	}
	c, err := agentapi.Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o, err := c.Claim(ctx, agentapi.ClaimRequest{ID: "m1"})
	if err != nil || !o.Result.Success {
		t.Fatalf("claim: %+v %v", o, err)
	}
}

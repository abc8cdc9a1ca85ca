package agentapi

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred returns the credentials of the process at the other end of c,
// as the kernel recorded them when it connected (SO_PEERCRED).
func peerCred(c *net.UnixConn) (uid, gid uint32, pid int32, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, 0, err
	}
	if cerr != nil {
		return 0, 0, 0, cerr
	}
	return cred.Uid, cred.Gid, cred.Pid, nil
}

//go:build !linux

package agentapi

import (
	"errors"
	"net"
)

// peerCred is Linux's SO_PEERCRED; elsewhere the service serves no agent
// (every connection is refused), so agents write directly.
func peerCred(c *net.UnixConn) (uid, gid uint32, pid int32, err error) {
	return 0, 0, 0, errors.New("agentapi: peer credentials are read on Linux only")
}

package netgate

import "net"

// AddrKey is what a per-address cap counts a TCP client by: the IPv4
// address, the /64 of an IPv6 one (a single client has the whole /64); ""
// for any other address (a Unix socket's), which no such cap counts.
func AddrKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return ""
	}
	if v4 := ta.IP.To4(); v4 != nil {
		return v4.String()
	}
	return ta.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

package confkit

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/monoco/courier/schema"
)

// Checker collects what the checks of a config find, each error at its
// dotted key and that key's line. At returns a checker for a part of the
// document whose keys are relative to that part; all of them add to one
// list.
type Checker struct {
	path    string
	line    func(path string) int
	secrets bool
	errs    *schema.Errors
}

// NewChecker returns a checker at the document's root. line gives the line
// of a dotted path (of its nearest ancestor when the path is not in the
// file); secrets says whether the config's secrets were read.
func NewChecker(line func(path string) int, secrets bool) *Checker {
	return &Checker{line: line, secrets: secrets, errs: new(schema.Errors)}
}

// At returns a checker for the part of the document at key, relative to
// k's: k.At("courier.adapters.email").At("accounts[0]").Bad("name", ...)
// names courier.adapters.email.accounts[0].name.
func (k *Checker) At(key string) *Checker {
	c := *k
	c.path = k.Path(key)
	return &c
}

// Path returns the whole dotted path of key, relative to k; "" is k's own.
func (k *Checker) Path(key string) string {
	switch {
	case key == "":
		return k.path
	case k.path == "":
		return key
	}
	return k.path + "." + key
}

// Line returns the line of key, relative to k, in the file (that of its
// nearest ancestor when the file leaves it out; 0 when unknown).
func (k *Checker) Line(key string) int {
	if k.line == nil {
		return 0
	}
	return k.line(k.Path(key))
}

// Secrets reports whether the config's secrets were read: without them a
// secret is empty, so a check that one is set would refuse every config.
func (k *Checker) Secrets() bool { return k.secrets }

// Bad reports that the value at key, relative to k, is wrong.
func (k *Checker) Bad(key, format string, args ...any) {
	k.Add(&schema.FieldError{Line: k.Line(key), Path: k.Path(key), Msg: fmt.Sprintf(format, args...)})
}

// Add reports an error as it is (its Path whole, not relative to k).
func (k *Checker) Add(e *schema.FieldError) { *k.errs = append(*k.errs, e) }

// Errors returns what was reported, in the order it was, through k and
// every checker At made from it.
func (k *Checker) Errors() schema.Errors { return *k.errs }

// ListenAddr checks an address a server of Courier's listens on: host:port
// with a port from 1 to 65535 (0 would pick one at random, which nobody
// could then reach) and a host that is empty (every interface), an IP
// address or a name (resolved when the service starts; doctor tries to
// bind it).
func ListenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: the port %q is not a number from 1 to 65535", addr, port)
	}
	if strings.ContainsAny(host, " /\\@") {
		return fmt.Errorf("%q: the host %q is not an address or a name", addr, host)
	}
	return nil
}

// LoopbackHost reports whether host is this machine by name or address:
// localhost (RFC 6761 reserves it for loopback), 127.0.0.0/8 or ::1. Other
// names are not resolved: a name can point anywhere tomorrow.
func LoopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// NoPlainHTTP refuses, at key, a provider endpoint raw that is http:// to
// a host off loopback: the token Courier sends it would cross the network
// in clear text, as a plaintext login would (which the email adapter
// refuses likewise). Loopback stays allowed: a local fake or proxy, where
// whoever could read the wire can read the config as well.
func (k *Checker) NoPlainHTTP(key, raw string) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || !strings.EqualFold(u.Scheme, "http") || LoopbackHost(u.Hostname()) {
		return
	}
	k.Bad(key, "%q is plain http to a host off loopback, so the token would go to %s in clear text: use https (http is for localhost, 127.0.0.0/8 and ::1 only)", raw, u.Hostname())
}

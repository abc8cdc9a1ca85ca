//go:build !linux

package agentapi

// withShortPath calls fn with path: the /proc/self/fd way around the
// sun_path limit is Linux's.
func withShortPath(path string, fn func(addr string) error) error { return fn(path) }

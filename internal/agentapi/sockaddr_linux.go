package agentapi

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxSunPath is the longest socket path bind(2) and connect(2) take:
// sun_path holds 108 bytes, its NUL included.
const maxSunPath = 107

// withShortPath calls fn with an address for the socket at path that fits
// in sun_path: path itself, or for a longer one /proc/self/fd/<n>/<name>,
// through a descriptor of its folder. A workspace may be deep (a home
// folder, a CI checkout) and its socket path over the limit; this way it
// needs no other place.
func withShortPath(path string, fn func(addr string) error) error {
	if len(path) <= maxSunPath {
		return fn(path)
	}
	dir, name := filepath.Split(path)
	// O_PATH needs no permission on the folder itself: connect(2) checks
	// the search permission when it resolves the name, as for the long
	// path.
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	addr := "/proc/self/fd/" + strconv.Itoa(fd) + "/" + name
	if len(addr) > maxSunPath {
		return fmt.Errorf("agentapi: socket name %q is over %d bytes", name, maxSunPath-len("/proc/self/fd/nnnn/"))
	}
	return fn(addr)
}

// Package buildinfo says which Courier this binary is: the version, the
// VCS revision and time it was built from, and the Go that built it.
//
// Go stamps the revision and time into the build info when it builds from
// a checkout with -buildvcs (its default), but not under
// GOFLAGS=-buildvcs=false, from a source archive, or through some
// packagers. scripts/build.sh therefore stamps them itself, with -ldflags
// -X into the variables below; a binary built without either says so.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by scripts/build.sh (-ldflags -X): the output of
// `git describe --always --dirty`, the commit's full hash and its time
// (`git log -1 --format=%cI`). Empty in a plain `go build`.
var (
	version    string
	revision   string
	commitTime string
)

// Unstamped says how to build a binary that knows its version, for one
// that does not (Info.Stamped empty).
const Unstamped = "built without version stamps: build with scripts/build.sh"

// Info is what a binary knows of its build.
type Info struct {
	// Version is the stamped `git describe`, else the module version Go
	// recorded (a `go install module@version`), else "devel".
	Version string `json:"version"`
	// Revision is the commit hash, Time its commit time (RFC 3339);
	// Modified is set when the work tree had uncommitted changes.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Stamped says where Revision and Time come from: "build.sh" (the
	// link-time stamps), "go" (Go's own VCS stamps) or "" (nowhere).
	Stamped string `json:"stamped"`
	// Go is the Go version and platform that built the binary.
	Go string `json:"go"`
}

// Get returns this binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(bi, version, revision, commitTime)
}

func get(bi *debug.BuildInfo, stampVersion, stampRevision, stampTime string) Info {
	i := Info{Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil && bi.GoVersion != "" {
		i.Go = bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
	}
	if stampVersion != "" || stampRevision != "" {
		i.Version, i.Revision, i.Time, i.Stamped = stampVersion, stampRevision, stampTime, "build.sh"
		i.Modified = strings.HasSuffix(stampVersion, "-dirty")
		if i.Version == "" {
			i.Version = "devel"
		}
		return i
	}
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision, i.Stamped = s.Value, "go"
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			i.Version = v
			return i
		}
	}
	i.Version = "devel"
	return i
}

// Version is the one-word version of this binary, for logs and /health:
// Info.Version, "(devel)" for a build that has none.
func Version() string {
	v := Get().Version
	if v == "devel" {
		return "(devel)"
	}
	return v
}

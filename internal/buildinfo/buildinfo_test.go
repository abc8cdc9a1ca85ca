package buildinfo

import (
	"runtime/debug"
	"testing"
)

// Where each field comes from: scripts/build.sh's stamps first, else Go's
// own VCS stamps and module version, else nothing (Stamped empty).
func TestGet(t *testing.T) {
	goVCS := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, revision, at string
		wantVersion, wantRev  string
		wantStamped, wantTime string
		wantModified          bool
	}{
		{name: "build.sh", bi: goVCS, version: "v1.2.0-3-gdef-dirty", revision: "def", at: "2026-11-28T03:57:25+00:00",
			wantVersion: "v1.2.0-3-gdef-dirty", wantRev: "def", wantStamped: "build.sh", wantTime: "2026-11-28T03:57:25+00:00", wantModified: true},
		{name: "go's vcs stamps", bi: goVCS, wantVersion: "devel", wantRev: "abc", wantStamped: "go", wantTime: "2026-01-02T03:04:05Z", wantModified: true},
		{name: "go install module@version", bi: &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, wantVersion: "v1.2.0"},
		{name: "nothing", bi: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, wantVersion: "devel"},
		{name: "no build info", wantVersion: "devel"},
	} {
		i := get(c.bi, c.version, c.revision, c.at)
		if i.Version != c.wantVersion || i.Revision != c.wantRev || i.Stamped != c.wantStamped || i.Time != c.wantTime || i.Modified != c.wantModified || i.Go == "" {
			t.Errorf("%s: %+v", c.name, i)
		}
	}
}

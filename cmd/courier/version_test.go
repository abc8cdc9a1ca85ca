package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 19, item 3: `courier version` printed "(devel)" on every binary
// these machines build (GOFLAGS=-buildvcs=false). A binary without stamps
// says how to build one with them (this test binary has none: go test
// stamps no VCS data).
func TestVersionUnstamped(t *testing.T) {
	ws := t.TempDir()
	out, e, code := cli(t, ws, "", "version")
	if code != 0 {
		t.Fatalf("version: %d %s", code, e)
	}
	first, _, _ := strings.Cut(out, "\n")
	if first != "courier (devel, built without version stamps: build with scripts/build.sh)" {
		t.Errorf("first line %q", first)
	}
	for _, want := range []string{"\ngo:       go1.", "\nprotocol: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	out, e, code = cli(t, ws, "", "version", "--format", "json")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("version --format json: %d %v %s %s", code, err, e, out)
	}
	if v["version"] != "devel" || v["stamped"] != "" || !strings.Contains(v["note"].(string), "scripts/build.sh") ||
		v["revision"] != nil || !strings.HasPrefix(v["go"].(string), "go1.") {
		t.Errorf("json %v", v)
	}
	if _, e, code := cli(t, ws, "", "version", "--format", "yaml"); code != 64 || !strings.Contains(e, "yaml") {
		t.Errorf("--format yaml: exit %d %q, want 64 naming it", code, e)
	}
}

// scripts/build.sh stamps the version, the commit and its time whatever
// GOFLAGS says, and prints where it wrote the binary; the binary prints
// them.
func TestBuildScriptStamps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).Output()
		if err != nil {
			t.Skipf("not a git checkout (git %v: %v)", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	describe, rev, at := git("describe", "--always", "--dirty"), git("rev-parse", "HEAD"), git("log", "-1", "--format=%cI")
	bin := filepath.Join(t.TempDir(), "courier")
	cmd := exec.Command(filepath.Join(repo, "scripts", "build.sh"), "-o", bin)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/build.sh: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != bin {
		t.Errorf("build.sh printed %q, want the binary's path %q", got, bin)
	}
	text, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	mod := ""
	if strings.HasSuffix(describe, "-dirty") {
		mod = " (modified)"
	}
	if want := "courier " + describe + "\nrevision: " + rev + mod + "\ntime:     " + at + "\ngo:       go1."; !strings.HasPrefix(string(text), want) {
		t.Errorf("version:\n%s\nwant it to start with\n%s", text, want)
	}
	js, err := exec.Command(bin, "version", "--format", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Version, Revision, Time, Stamped, Go, Note string }
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	if v.Version != describe || v.Revision != rev || v.Time != at || v.Stamped != "build.sh" || v.Note != "" || !strings.HasPrefix(v.Go, "go1.") {
		t.Errorf("json %+v, want version %s revision %s time %s stamped by build.sh", v, describe, rev, at)
	}
}

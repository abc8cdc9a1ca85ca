package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/monoco/courier/schema"
)

// attachSetup is one attack's ground: a folder base holding the workspace
// base/ws and, beside it, what lies outside (base/outside/secret.txt, mode
// 0600, readable by the user running send, as /etc/shadow is by root).
type attachSetup struct {
	t              *testing.T
	base, ws       string
	secret, drafts string
}

func newAttachSetup(t *testing.T, config string) *attachSetup {
	t.Helper()
	base := t.TempDir()
	s := &attachSetup{t: t, base: base, ws: filepath.Join(base, "ws"), secret: filepath.Join(base, "outside", "secret.txt")}
	s.drafts = filepath.Join(s.ws, "drafts")
	for _, d := range []string{s.ws, s.drafts, filepath.Dir(s.secret)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, e, code := cli(t, s.ws, "", "init"); code != 0 {
		t.Fatalf("init: %d %s", code, e)
	}
	writeConfig(t, s.ws, "courier:\n"+config)
	s.write(s.secret, "secret", 0o600)
	return s
}

func (s *attachSetup) write(path, content string, mode os.FileMode) {
	s.t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		s.t.Fatal(err)
	}
}

func (s *attachSetup) link(target, name string) {
	s.t.Helper()
	if err := os.Symlink(target, name); err != nil {
		s.t.Fatal(err)
	}
}

// draft writes a draft whose one artifact (line 5) is path, at where
// (relative to the workspace).
func (s *attachSetup) draft(where, path string) string {
	f := filepath.Join(s.ws, where)
	s.write(f, "---\nprovider: lark\nto: oc_1\nartifacts:\n  - path: "+path+"\n---\nSee attached.\n", 0o644)
	return f
}

// state is what a refusal must leave as it was: the queue, the staging
// folder and the dropzone.
func (s *attachSetup) state() string {
	mb := filepath.Join(s.ws, ".monoco/mailbox")
	return dirState(s.t, filepath.Join(mb, "outbound")) + dirState(s.t, filepath.Join(mb, ".tmp")) + dirState(s.t, filepath.Join(s.ws, ".monoco/dropzone"))
}

// refused runs send and asserts exit 65, an error with every want, and
// nothing queued or copied; --dry-run too, which checks the same.
func (s *attachSetup) refused(args []string, want ...string) {
	s.t.Helper()
	for _, dry := range []bool{false, true} {
		a := args
		if dry {
			a = append(append([]string(nil), args...), "--dry-run")
		}
		before := s.state()
		out, e, code := cli(s.t, s.ws, "", a...)
		if code != exitDataErr {
			s.t.Errorf("send %v: exit %d, want %d (65)\nstdout %s\nstderr %s", a, code, exitDataErr, out, e)
		}
		for _, w := range want {
			if !strings.Contains(e, w) {
				s.t.Errorf("send %v: stderr %q lacks %q", a, e, w)
			}
		}
		if strings.Contains(out+e, "secret\n") || strings.Contains(out, "secret") {
			s.t.Errorf("send %v printed the file's content: %s %s", a, out, e)
		}
		if after := s.state(); after != before {
			s.t.Errorf("send %v refused, yet changed outbound/, .tmp/ or the dropzone:\n%s", a, after)
		}
	}
}

// accepted runs send and returns the artifact queued, after checking that
// the dropzone holds exactly content under its id.
func (s *attachSetup) accepted(args []string, content string) schema.DraftArtifact {
	s.t.Helper()
	out, e, code := cli(s.t, s.ws, "", append(args, "--format", "json")...)
	if code != 0 {
		s.t.Fatalf("send %v: exit %d %s", args, code, e)
	}
	var res struct{ Path string }
	json.Unmarshal([]byte(out), &res)
	data, err := os.ReadFile(filepath.Join(s.ws, res.Path))
	if err != nil {
		s.t.Fatalf("queued draft: %v (%s)", err, out)
	}
	d, _, err := schema.DecodeDraft(data)
	if err != nil || len(d.Artifacts) != 1 {
		s.t.Fatalf("queued draft: %v %+v", err, d)
	}
	a := d.Artifacts[0]
	if want := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(content))); a.ID != want || a.Path != "" {
		s.t.Errorf("artifact %+v, want id %s and no path", a, want)
	}
	stored, err := os.ReadFile(filepath.Join(s.ws, ".monoco/dropzone/sha256", a.ID[7:9], a.ID[7:]))
	if err != nil || string(stored) != content {
		s.t.Errorf("dropzone copy %q %v, want %q", stored, err, content)
	}
	return a
}

// TestAttachAttacks: issue 9, item 1. A prompt-injected draft (or a
// --attach) that names a file the user can read but should never mail
// out is refused with exit 65, naming the field and line (or the flag)
// and saying why and what would allow it; nothing is queued and nothing
// copied into the dropzone, with or without --dry-run.
func TestAttachAttacks(t *testing.T) {
	t.Run("absolute path outside the workspace", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.refused([]string{"send", s.draft("drafts/d.md", s.secret)},
			"d.md:5: artifacts[0].path: "+s.secret+" is outside the workspace "+s.ws, "courier.outbound.attach_roots")
	})
	t.Run("../../secret.txt from a draft in the workspace", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.write(filepath.Join(s.base, "secret.txt"), "secret", 0o600)
		s.refused([]string{"send", s.draft("drafts/d.md", "../../secret.txt")},
			"d.md:5: artifacts[0].path: ../../secret.txt ("+filepath.Join(s.base, "secret.txt")+") is outside the workspace")
	})
	t.Run("/proc/self/environ", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.refused([]string{"send", s.draft("drafts/d.md", "/proc/self/environ")},
			"d.md:5: artifacts[0].path: /proc/self/environ is under /proc, whose files", "never attached")
	})
	t.Run("/proc/self/environ when a root holds /proc", func(t *testing.T) {
		// attach_roots: [/] allows much, never /proc, /sys or /dev.
		s := newAttachSetup(t, "  outbound: {attach_roots: [/]}\n")
		s.refused([]string{"send", s.draft("drafts/d.md", "/proc/self/environ")}, "artifacts[0].path: /proc/self/environ is under /proc")
		s.refused([]string{"send", s.draft("drafts/d.md", "/sys/kernel/notes")}, "artifacts[0].path: /sys/kernel/notes is under /sys")
		// A link's name says nothing of /proc: where it leads does.
		env := filepath.Join(s.base, "outside", "env")
		s.link("/proc/self/environ", env)
		s.refused([]string{"send", s.draft("drafts/d.md", env)}, "artifacts[0].path: "+env+" is a link to /proc/", "under /proc")
		// A relative link, which os.Root follows within "/": the file
		// opened is on procfs, and that is refused too.
		rel, _ := filepath.Rel(filepath.Dir(env), "/proc/self/environ")
		env2 := filepath.Join(s.base, "outside", "env2")
		s.link(rel, env2)
		s.refused([]string{"send", s.draft("drafts/d.md", env2)}, "artifacts[0].path: "+env2+" is on a proc filesystem")
	})
	t.Run("symlink in the workspace pointing outside", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.link(s.secret, filepath.Join(s.drafts, "report.pdf"))
		s.refused([]string{"send", s.draft("drafts/d.md", "report.pdf")},
			"d.md:5: artifacts[0].path: report.pdf ("+filepath.Join(s.drafts, "report.pdf")+") leads through a symbolic link to "+s.secret+", outside "+s.ws)
		// A linked folder on the way, not only the last name.
		s.link(filepath.Dir(s.secret), filepath.Join(s.drafts, "out"))
		s.refused([]string{"send", s.draft("drafts/d.md", "out/secret.txt")}, "leads through a symbolic link", "outside "+s.ws)
		// An absolute link, even to a file inside: os.Root takes it as
		// leaving, and the error says what to do.
		s.write(filepath.Join(s.ws, "reports", "r.txt"), "inside", 0o644)
		s.link(filepath.Join(s.ws, "reports", "r.txt"), filepath.Join(s.drafts, "abs.txt"))
		s.refused([]string{"send", s.draft("drafts/d.md", "abs.txt")}, "leads through a symbolic link with an absolute target (to "+filepath.Join(s.ws, "reports", "r.txt")+"); only relative links are followed")
	})
	t.Run("the workspace's .monoco/", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.refused([]string{"send", s.draft("d.md", ".monoco/config/courier.yaml")},
			"d.md:5: artifacts[0].path: .monoco/config/courier.yaml ("+filepath.Join(s.ws, ".monoco/config/courier.yaml")+") is in the workspace's .monoco/", "sha256: id")
		s.refused([]string{"send", s.draft("d.md", ".monoco/mailbox/.state/courier.db")}, "is in the workspace's .monoco/")
	})
	t.Run(".monoco/ even when hidden files are allowed", func(t *testing.T) {
		s := newAttachSetup(t, "  outbound: {attach_hidden: true}\n")
		s.refused([]string{"send", s.draft("d.md", ".monoco/config/courier.yaml")}, "is in the workspace's .monoco/")
	})
	t.Run("hidden files", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.write(filepath.Join(s.ws, ".env"), "IMAP_PASSWORD=hunter2\n", 0o600)
		s.write(filepath.Join(s.ws, ".git", "config"), "[remote]\n", 0o644)
		s.refused([]string{"send", s.draft("d.md", ".env")},
			`d.md:5: artifacts[0].path: .env (`+filepath.Join(s.ws, ".env")+`) is hidden (".env" starts with "."): `, "unless courier.outbound.attach_hidden is true")
		s.refused([]string{"send", s.draft("d.md", ".git/config")}, `is hidden (".git" starts with ".")`)
		// A link with a plain name to a hidden file is the hidden file.
		s.link("../.env", filepath.Join(s.drafts, "notes.txt"))
		s.refused([]string{"send", s.draft("drafts/d.md", "notes.txt")}, "a link to "+filepath.Join(s.ws, ".env"), `is hidden (".env" starts with ".")`)
	})
	t.Run("a directory", func(t *testing.T) {
		s := newAttachSetup(t, "")
		os.Mkdir(filepath.Join(s.drafts, "reports"), 0o755)
		s.refused([]string{"send", s.draft("drafts/d.md", "reports")}, "d.md:5: artifacts[0].path: reports ("+filepath.Join(s.drafts, "reports")+") is a directory, not a file")
	})
	t.Run("a named pipe", func(t *testing.T) {
		// Opening a FIFO waits for a writer: send must refuse it, not
		// hang (the test would time out).
		s := newAttachSetup(t, "")
		if err := syscall.Mkfifo(filepath.Join(s.drafts, "pipe"), 0o644); err != nil {
			t.Fatal(err)
		}
		s.refused([]string{"send", s.draft("drafts/d.md", "pipe")}, "artifacts[0].path: pipe (", "is not a regular file (a named pipe)")
	})
	t.Run("--attach outside the workspace", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.refused([]string{"send", "--to", "oc_1", "--text", "x", "--attach", s.secret}, "--attach "+s.secret+": "+s.secret+" is outside the workspace")
		s.refused([]string{"send", "--to", "oc_1", "--text", "x", "--attach", "/proc/self/environ"}, "--attach /proc/self/environ: /proc/self/environ is under /proc")
	})
	t.Run("one refused artifact of two copies neither", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.write(filepath.Join(s.drafts, "ok.txt"), "fine", 0o644)
		f := filepath.Join(s.drafts, "two.md")
		s.write(f, "---\nprovider: lark\nto: oc_1\nartifacts:\n  - path: ok.txt\n  - path: "+s.secret+"\n---\nhi\n", 0o644)
		s.refused([]string{"send", f}, "two.md:6: artifacts[1].path: "+s.secret+" is outside the workspace")
	})
}

// TestAttachAllowed: what the policy lets through is copied, the content
// of the file named (through a link that stays in its root too).
func TestAttachAllowed(t *testing.T) {
	t.Run("a file in the workspace", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.write(filepath.Join(s.ws, "reports", "r1.txt"), "disk full at 02:14", 0o644)
		a := s.accepted([]string{"send", s.draft("drafts/d.md", "../reports/r1.txt")}, "disk full at 02:14")
		if a.Name != "r1.txt" || a.MimeType != "text/plain; charset=utf-8" {
			t.Errorf("artifact %+v", a)
		}
		s.accepted([]string{"send", "--to", "oc_1", "--text", "x", "--attach", filepath.Join(s.ws, "reports", "r1.txt")}, "disk full at 02:14")
	})
	t.Run("a link that stays in the workspace", func(t *testing.T) {
		s := newAttachSetup(t, "")
		s.write(filepath.Join(s.ws, "reports", "r2.txt"), "second report", 0o644)
		s.link("../reports/r2.txt", filepath.Join(s.drafts, "latest.txt"))
		a := s.accepted([]string{"send", s.draft("drafts/d.md", "latest.txt")}, "second report")
		if a.Name != "latest.txt" {
			t.Errorf("name %q, want the name the draft gave", a.Name)
		}
	})
	t.Run("a folder of attach_roots outside the workspace", func(t *testing.T) {
		// Relative, from the config's workspace: ../shared is base/shared.
		s := newAttachSetup(t, "  outbound: {attach_roots: [../shared]}\n")
		data := filepath.Join(s.base, "shared", "q3", "data.csv")
		s.write(data, "a,b\n1,2\n", 0o644)
		s.accepted([]string{"send", s.draft("drafts/d.md", data)}, "a,b\n1,2\n")
		// The folder beside it is still out.
		s.refused([]string{"send", s.draft("drafts/d.md", s.secret)}, "is outside the workspace")
	})
	t.Run("hidden files when attach_hidden is true", func(t *testing.T) {
		s := newAttachSetup(t, "  outbound: {attach_hidden: true}\n")
		s.write(filepath.Join(s.ws, ".reports", "r.txt"), "from a hidden folder", 0o644)
		s.accepted([]string{"send", s.draft("d.md", ".reports/r.txt")}, "from a hidden folder")
	})
}

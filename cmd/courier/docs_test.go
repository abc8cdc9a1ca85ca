package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/providers"
)

// The documentation as a user reads it: README.md and docs/*.md.

// repoRoot is the repository, from this package's folder.
const repoRoot = "../.."

// configMarker is the first line of a YAML block of the docs that is a
// whole courier.yaml: TestDocsConfigs loads every such block.
const configMarker = "# courier.yaml"

// docFiles are README.md and docs/*.md, relative to the repository.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, files...)
}

// fencedBlock is a fenced block of a doc.
type fencedBlock struct {
	file string
	line int // the fence's line
	info string
	text string
}

// fencedBlocks returns the fenced (```) blocks of a Markdown file.
func fencedBlocks(t *testing.T, file string) []fencedBlock {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []fencedBlock
	var cur *fencedBlock
	for i, l := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &fencedBlock{file: file, line: i + 1, info: strings.TrimPrefix(trimmed, "```")}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	return out
}

var (
	envRef  = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	fileKey = regexp.MustCompile(`\b([a-z_]+_file):\s*((?:\$\{[A-Za-z_]+\})?[^\s,}#]*)`)
)

// TestDocsConfigs: every YAML block of the docs marked as a courier
// config (its first line "# courier.yaml") loads, with its secrets read
// from dummy files and variables, and passes doctor's offline checks: no
// secret others can read, and every provider built and validated from
// it as serve builds them.
func TestDocsConfigs(t *testing.T) {
	n := 0
	for _, f := range docFiles(t) {
		for _, b := range fencedBlocks(t, f) {
			if b.info != "yaml" || !strings.HasPrefix(b.text, configMarker+"\n") {
				continue
			}
			n++
			name := fmt.Sprintf("%s:%d", filepath.Base(b.file), b.line)
			t.Run(name, func(t *testing.T) { checkDocConfig(t, b.text) })
		}
	}
	if n < 10 {
		t.Errorf("only %d config blocks marked %q in the docs: the marker was lost?", n, configMarker)
	}
}

// checkDocConfig loads one config of the docs in a new workspace and runs
// doctor's offline checks on it.
func checkDocConfig(t *testing.T, text string) {
	ws := newWorkspace(t)
	cfgDir := filepath.Join(ws, ".monoco", "config")
	creds := t.TempDir()
	for _, m := range envRef.FindAllStringSubmatch(text, -1) {
		if m[1] == "CREDENTIALS_DIRECTORY" {
			t.Setenv(m[1], creds)
		} else {
			t.Setenv(m[1], "docs-test-value-0123456789")
		}
	}
	abs := t.TempDir()
	for _, m := range fileKey.FindAllStringSubmatch(text, -1) {
		key, path := m[1], m[2]
		switch {
		case strings.HasPrefix(path, "${CREDENTIALS_DIRECTORY}/"):
			path = filepath.Join(creds, strings.TrimPrefix(path, "${CREDENTIALS_DIRECTORY}/"))
		case filepath.IsAbs(path):
			// An example's absolute path (/srv/...): the test's own.
			own := filepath.Join(abs, strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_"))
			text = strings.ReplaceAll(text, path, own)
			path = own
		default:
			path = filepath.Join(cfgDir, path)
		}
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, []byte(dummySecret(key)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(cfgDir, "courier.yaml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &out, rootFlag: ws, secrets: true}
	defer a.close()
	cfg, err := a.loadConfig()
	if err != nil {
		t.Fatalf("the config does not load: %v\n%s", err, text)
	}
	for _, msg := range readableSecrets(cfg, ws) {
		t.Errorf("doctor: %s", msg)
	}
	for _, msg := range weakSecrets(cfg) {
		t.Errorf("doctor warns: %s", msg)
	}
	if _, err := a.providerTable().Build(cfg, providers.Env{Log: a.logger()}); err != nil {
		t.Errorf("the providers cannot be built from it: %v\n%s", err, text)
	}
}

// dummySecret is a value of the form a key's secret takes.
func dummySecret(key string) string {
	switch {
	case strings.Contains(key, "bot_token"):
		return "xoxb-0000-docs-test-token"
	case strings.Contains(key, "app_token"):
		return "xapp-1-docs-test-token"
	}
	return "docs-test-secret-0123456789"
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file of the repository (a #fragment aside).
func TestDocsLinks(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p, err := filepath.Abs(filepath.Join(filepath.Dir(f), target))
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(root, p)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: the link %s leads out of the repository", filepath.Base(f), m[1])
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: the link %s names no file of the repository (%s)", filepath.Base(f), m[1], rel)
			}
		}
	}
}

// TestDocsSelfContained: the docs cite nothing a reader of the
// repository cannot open: files beside it, the design notes and seeds
// they came from, issues, commit ids.
func TestDocsSelfContained(t *testing.T) {
	bad := regexp.MustCompile(`\.\./shared|DESIGN\.md|\bseeds?\b|\bissues? ?#?\d|\b[0-9a-f]{7,40}\b`)
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(data), "\n") {
			for _, m := range bad.FindAllString(l, -1) {
				if strings.Trim(m, "0123456789") == "" {
					continue // a number, not a commit
				}
				t.Errorf("%s:%d: %q cites what is not in the repository: %s", filepath.Base(f), i+1, m, l)
			}
		}
	}
}

// TestDocsMCPConfigs: every MCP client config of the docs is whole JSON
// under mcpServers, and each server it spawns names the workspace
// (--root) and the agent (--agent or COURIER_AGENT): spawned from a
// client's folder without --root, `courier mcp` found no mailbox and the
// client said "server disconnected".
func TestDocsMCPConfigs(t *testing.T) {
	n := 0
	for _, f := range docFiles(t) {
		for _, b := range fencedBlocks(t, f) {
			if b.info != "json" || !strings.Contains(b.text, "mcpServers") {
				continue
			}
			n++
			where := fmt.Sprintf("%s:%d", filepath.Base(b.file), b.line)
			var c struct {
				MCPServers map[string]struct {
					Command string            `json:"command"`
					Args    []string          `json:"args"`
					Env     map[string]string `json:"env"`
					URL     string            `json:"url"`
				} `json:"mcpServers"`
			}
			if err := json.Unmarshal([]byte(b.text), &c); err != nil || len(c.MCPServers) == 0 {
				t.Errorf("%s: not an mcpServers config: %v\n%s", where, err, b.text)
				continue
			}
			for name, s := range c.MCPServers {
				if s.URL != "" {
					continue // over HTTP: the service's workspace, agents name@mcp
				}
				args := strings.Join(s.Args, " ")
				if filepath.Base(s.Command) != "courier" || !slices.Contains(s.Args, "--root") || s.Args[len(s.Args)-1] != "mcp" ||
					(!slices.Contains(s.Args, "--agent") && s.Env["COURIER_AGENT"] == "") {
					t.Errorf("%s: server %s runs %s %s: want courier --root WORKSPACE, --agent NAME (or COURIER_AGENT), mcp", where, name, s.Command, args)
				}
			}
		}
	}
	if n < 3 {
		t.Errorf("only %d MCP client configs in the docs (Claude Desktop, Claude Code, Cursor)", n)
	}
}

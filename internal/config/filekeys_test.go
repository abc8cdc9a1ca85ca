package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/monoco/courier/internal/config"
)

// Every *_file key resolves from the config file's folder: a secret's
// (here a hook's secret_file) and courier.mcp.token_file alike, whatever
// the current folder or the workspace (issue 19: token_file resolved from
// the workspace, the secrets from the config's folder).
func TestFileKeysFromConfigFolder(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, ".monoco", "config")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "hook.secret"), []byte("hook-secret-from-the-config-folder\n"), 0o600)
	path := filepath.Join(dir, "courier.yaml")
	os.WriteFile(path, []byte(`courier:
  mcp: {token_file: mcp.token}
  notify:
    - name: pager
      url: https://hooks.example.com/x
      secret_file: hook.secret
`), 0o600)
	t.Chdir(ws)
	cfg, err := config.Load(path, config.LoadOptions{Secrets: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Courier.MCP.TokenFile, filepath.Join(dir, "mcp.token"); got != want {
		t.Errorf("courier.mcp.token_file = %s, want %s", got, want)
	}
	if got := cfg.Courier.Notify[0].Secret.Reveal(); got != "hook-secret-from-the-config-folder" {
		t.Errorf("courier.notify[0].secret_file read %q", got)
	}
	abs := filepath.Join(ws, "elsewhere", "tok")
	os.WriteFile(path, []byte("courier:\n  mcp: {token_file: "+abs+"}\n"), 0o600)
	if cfg, err := config.Load(path, config.LoadOptions{}); err != nil || cfg.Courier.MCP.TokenFile != abs {
		t.Errorf("an absolute token_file: %v %+v", err, cfg)
	}
}

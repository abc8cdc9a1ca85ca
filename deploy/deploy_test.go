package deploy

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/adapters/email"
	"github.com/monoco/courier/adapters/lark"
	"github.com/monoco/courier/adapters/slack"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/providers/all"
	"github.com/monoco/courier/internal/testutil"
)

// directives parses the unit into section -> directive -> values, in
// order (a directive may be given more than once).
func directives(t *testing.T, unit []byte) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("courier.service:%d: not a directive: %q", n, line)
			}
			if strings.HasSuffix(v, "\\") {
				t.Fatalf("courier.service:%d: continued lines are not used here", n)
			}
			out[section][strings.TrimSpace(k)] = append(out[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return out
}

// TestUnitDirectives pins the unit's behaviour and hardening, so that a
// later edit cannot drop a directive silently. For a directive given more
// than once, systemd's last assignment wins (list directives such as
// SystemCallFilter accumulate; an empty assignment resets them).
func TestUnitDirectives(t *testing.T) {
	d := directives(t, Unit)
	svc := d["Service"]
	if svc == nil {
		t.Fatal("no [Service] section")
	}
	last := func(k string) (string, bool) {
		v := svc[k]
		if len(v) == 0 {
			return "", false
		}
		return v[len(v)-1], true
	}
	for _, kv := range []struct{ k, v string }{
		{"Type", "notify"},
		{"NotifyAccess", "main"},
		{"WatchdogSec", "30"},
		{"Restart", "on-failure"},
		{"RestartSec", "2"},
		{"TimeoutStopSec", "45"},
		{"KillMode", "mixed"},
		{"User", "courier"},
		{"Group", "courier"},
		{"UMask", "0027"},
		{"LimitNOFILE", "65536"},
		{"WorkingDirectory", "/var/lib/courier/workspace"},
		{"NoNewPrivileges", "yes"},
		{"ProtectSystem", "strict"},
		{"ReadWritePaths", "/var/lib/courier"},
		{"ProtectHome", "yes"},
		{"PrivateTmp", "yes"},
		{"PrivateDevices", "yes"},
		{"ProtectKernelTunables", "yes"},
		{"ProtectKernelModules", "yes"},
		{"ProtectKernelLogs", "yes"},
		{"ProtectControlGroups", "yes"},
		{"ProtectClock", "yes"},
		{"ProtectHostname", "yes"},
		{"RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"},
		{"RestrictNamespaces", "yes"},
		{"RestrictRealtime", "yes"},
		{"RestrictSUIDSGID", "yes"},
		{"LockPersonality", "yes"},
		{"MemoryDenyWriteExecute", "yes"},
		{"SystemCallArchitectures", "native"},
		{"CapabilityBoundingSet", ""},
		{"AmbientCapabilities", ""},
		// systemctl reload sends SIGHUP, which re-reads the config.
		{"ExecReload", "/bin/kill -HUP $MAINPID"},
	} {
		if got, ok := last(kv.k); !ok || got != kv.v {
			t.Errorf("%s=%q, want %q (present: %v)", kv.k, got, kv.v, ok)
		}
	}
	if f := svc["SystemCallFilter"]; len(f) == 0 || f[0] != "@system-service" {
		t.Errorf("SystemCallFilter=%q, want @system-service first", f)
	}
	for _, f := range svc["SystemCallFilter"] {
		if f == "" {
			t.Errorf("an empty SystemCallFilter= resets the filter")
		}
	}
	execStart, _ := last("ExecStart")
	for _, want := range []string{"/usr/local/bin/courier serve", "--root /var/lib/courier/workspace", "--log-format json"} {
		if !strings.Contains(execStart, want) {
			t.Errorf("ExecStart=%q lacks %q", execStart, want)
		}
	}
	// systemd must wait longer than Courier's own shutdown grace.
	stop, _ := last("TimeoutStopSec")
	secs, err := strconv.Atoi(stop)
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q", stop)
	}
	if grace := config.Default(nil).Courier.Outbound.ShutdownGrace.D(); time.Duration(secs)*time.Second <= grace {
		t.Errorf("TimeoutStopSec=%ds is not above outbound.shutdown_grace %v", secs, grace)
	}
	if got := d["Install"]["WantedBy"]; len(got) != 1 || got[0] != "multi-user.target" {
		t.Errorf("WantedBy=%q", got)
	}
}

// TestUnitVerifies runs systemd-analyze verify (and security) on the
// unit. /usr/local/bin/courier does not exist on a build machine, and
// verify rejects an ExecStart that is not an executable, so it checks a
// copy whose ExecStart names this test binary instead, a real executable;
// nothing is run.
func TestUnitVerifies(t *testing.T) {
	analyze := testutil.NeedCommand(t, "systemd-analyze", "systemd")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const bin = "ExecStart=/usr/local/bin/courier "
	if !bytes.Contains(Unit, []byte(bin)) {
		t.Fatalf("the unit has no %q", bin)
	}
	unit := bytes.Replace(Unit, []byte(bin), []byte("ExecStart="+self+" "), 1)
	path := filepath.Join(t.TempDir(), "courier.service")
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// Warnings about our unit name it; others (a broken unit elsewhere on
	// the machine, pulled in as a dependency) are only logged.
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case line == "":
		case strings.Contains(line, "courier"):
			t.Errorf("systemd-analyze verify: %s", line)
		default:
			t.Logf("systemd-analyze verify (not about courier.service): %s", line)
		}
	}

	// The exposure score (0 safe .. 10 exposed) from the hardening.
	out, err = exec.Command(analyze, "security", "--offline=yes", "--no-pager", path).CombinedOutput()
	if err != nil && bytes.Contains(out, []byte("--offline")) {
		t.Logf("systemd-analyze security --offline not supported here: %s", out)
		return
	}
	m := regexp.MustCompile(`Overall exposure level for courier\.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure %.1f", score)
	if score > 2.0 {
		t.Errorf("exposure %.1f, want at most 2.0 (it was 1.2):\n%s", score, out)
	}
}

// TestExampleConfig checks that the example is a config Courier accepts
// and that it names every key there is, and no other.
func TestExampleConfig(t *testing.T) {
	var doc map[string]any
	if err := yaml.Unmarshal(ExampleConfig, &doc); err != nil {
		t.Fatal(err)
	}
	courier, ok := doc["courier"].(map[string]any)
	if !ok {
		t.Fatalf("no courier: mapping: %v", doc)
	}
	if _, ok := courier["adapters"].(map[string]any); !ok {
		t.Fatalf("courier: has no adapters: mapping")
	}

	// Courier's own strict reader accepts it, with the providers' sections
	// of the provider table.
	cfg, err := config.Parse(ExampleConfig, t.TempDir(), all.Table.Adapters())
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	c := cfg.Courier
	if e := email.ConfigOf(cfg); c.Root != "." || c.HTTP.Listen != "127.0.0.1:8644" || !e.Enabled ||
		e.Receiver.SMTP != "127.0.0.1:2525" || lark.ConfigOf(cfg).Enabled || slack.ConfigOf(cfg).Enabled {
		t.Errorf("unexpected settings: %+v, email %+v", c, e)
	}

	// The keys: the courier-wide ones and each provider's, its name and
	// its section's.
	known := yamlKeys(reflect.TypeOf(config.Config{}), map[string]bool{})
	for _, row := range all.Table {
		known[string(row.Name)] = true
		yamlKeys(reflect.TypeOf(row.Config()), known)
	}
	text := string(ExampleConfig)
	// Keys, commented out or not: "key:" starting a line (after "#" and
	// "- "), or inside a flow mapping.
	keyLine := regexp.MustCompile(`^[\s#-]*([a-z][a-z0-9_]*):(\s|$)`)
	flowKey := regexp.MustCompile(`[{,]\s*([a-z][a-z0-9_]*):\s`)
	var unknown []string
	for n, line := range strings.Split(text, "\n") {
		var keys []string
		if m := keyLine.FindStringSubmatch(line); m != nil {
			keys = append(keys, m[1])
		}
		if code, _, _ := strings.Cut(strings.TrimLeft(line, " #"), " #"); strings.Contains(code, "{") {
			for _, m := range flowKey.FindAllStringSubmatch(code, -1) {
				keys = append(keys, m[1])
			}
		}
		for _, k := range keys {
			if !known[k] {
				unknown = append(unknown, k+" (line "+strconv.Itoa(n+1)+")")
			}
		}
	}
	if len(unknown) > 0 {
		t.Errorf("courier.example.yaml names keys courier.yaml does not have: %s", strings.Join(unknown, ", "))
	}
	var missing []string
	for k := range known {
		if !regexp.MustCompile(`\b` + k + `\b`).MatchString(text) {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("courier.example.yaml does not show these keys: %s", strings.Join(missing, ", "))
	}
}

// yamlKeys collects the yaml tags of t's fields, recursively.
func yamlKeys(t reflect.Type, keys map[string]bool) map[string]bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return keys
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		keys[name] = true
		yamlKeys(f.Type, keys)
	}
	return keys
}

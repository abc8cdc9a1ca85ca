package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/monoco/courier/internal/testutil"
)

// TestFlagHelpHasNoBackticks: pflag takes a backquoted word of a flag's
// usage for its value's placeholder, so `serve --help` showed
// "--log-file courier start" and `start --help` "--foreground courier
// serve". No usage string of any command's flags may hold a backtick.
func TestFlagHelpHasNoBackticks(t *testing.T) {
	a := &app{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if strings.Contains(f.Usage, "`") {
					t.Errorf("%s --%s: the usage %q holds a backtick, shown as the value's placeholder", c.CommandPath(), f.Name, f.Usage)
				}
			})
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(a.rootCommand("courier"))
}

// TestDoctorChmodAsStart: doctor names the same chmod as serve and start
// refuse with (`chmod o-rwx`), where it said `chmod o-r` for the config
// and `chmod 600` for a secret file.
func TestDoctorChmodAsStart(t *testing.T) {
	ws := newWorkspace(t)
	cfgPath := filepath.Join(ws, ".monoco/config/courier.yaml")
	secret := filepath.Join(t.TempDir(), "lark-secret")
	os.WriteFile(secret, []byte("a-long-enough-secret"), 0o644)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    lark: {enabled: false, app_secret_file: %s, verification_token: a-long-enough-token}\n", testutil.FreeAddr(t), secret))
	os.Chmod(cfgPath, 0o644)
	out, _, _ := cli(t, ws, "", "doctor")
	for _, want := range []string{
		cfgPath + " holds secrets (courier.adapters.lark.verification_token) and every user can read it: run `chmod o-rwx " + cfgPath + "`",
		"secret file " + secret + " is readable by every user: run `chmod o-rwx " + secret + "`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor does not say %q:\n%s", want, out)
		}
	}
}

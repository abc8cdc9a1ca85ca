package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

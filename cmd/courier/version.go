package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/buildinfo"
	"github.com/monoco/courier/schema"
)

// versionInfo is what `courier version` prints: the build, and the
// protocol of the files it writes.
type versionInfo struct {
	buildinfo.Info
	Protocol string `json:"protocol"`
	// Note says how to build a binary that knows its version, when this
	// one does not.
	Note string `json:"note,omitempty"`
}

func (a *app) versionCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the VCS revision and time, and the Go version",
		Long: `Print the version of this binary (git describe), the revision and commit
time it was built from, the Go version that built it, and the protocol of
the files it writes.

A binary built with scripts/build.sh carries them; one built with a plain
go build where Go does not stamp VCS data (GOFLAGS=-buildvcs=false) says
it was built without them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"text", "json"}); err != nil {
				return err
			}
			v := versionInfo{Info: buildinfo.Get(), Protocol: schema.ProtocolVersion}
			if v.Stamped == "" {
				v.Note = buildinfo.Unstamped
			}
			if format == "json" {
				return json.NewEncoder(a.stdout).Encode(v)
			}
			fmt.Fprintf(a.stdout, "courier %s\n", versionLine(v))
			if v.Revision != "" {
				mod := ""
				if v.Modified {
					mod = " (modified)"
				}
				fmt.Fprintf(a.stdout, "revision: %s%s\n", v.Revision, mod)
			}
			if v.Time != "" {
				fmt.Fprintf(a.stdout, "time:     %s\n", v.Time)
			}
			fmt.Fprintf(a.stdout, "go:       %s\nprotocol: %s\n", v.Go, v.Protocol)
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}

// versionLine is the version as the first line shows it: in parentheses
// when it is not one, saying how to build one that is when v has no
// stamps at all.
func versionLine(v versionInfo) string {
	switch {
	case v.Note != "":
		return "(" + v.Version + ", " + v.Note + ")"
	case v.Version == "devel":
		return "(devel)"
	}
	return v.Version
}

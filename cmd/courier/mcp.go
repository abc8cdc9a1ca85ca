package main

import (
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/mcpserver"
	"github.com/monoco/courier/internal/service"
)

// mcpGCPercent is the garbage collector's GOGC in `courier mcp` (unless
// GOGC is set): a page of list allocates about twice its size while the
// server's own heap stays small (SQLite's memory is not Go's), so at the
// default 100 the collector ran every page or two and took a third of
// the server's CPU for a listing (about 0.55 s for 30,000 entries, 0.4 s
// at 400), for a heap of a few megabytes more.
const mcpGCPercent = 400

func (a *app) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the mailbox to an agent over MCP on standard input and output (the agent spawns it)",
		Long: `Serve the mailbox over the Model Context Protocol on standard input and
output, for an agent that spawns it (claude mcp add courier -- courier mcp).
Tools: list, read, thread, context, claim, done, fail, send, attachment, with
the command line's rules, ids, errors and exit codes; resources: each
message as courier://message/<id>, and courier://inbox, whose subscribers are
told when mail arrives. The writing tools go through the service while it
runs, and act on the mailbox directly without it, as the command line does.
The service also serves MCP over HTTP at /mcp (courier.mcp).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(mcpGCPercent)
			}
			s, err := a.mcpServer()
			if err != nil {
				return err
			}
			return s.ServeStdio(cmd.Context(), a.stdin, a.stdout)
		},
	}
}

// mcpServer is the MCP server of `courier mcp`: the workspace's mailbox
// and dropzone open, its writes the command line's.
func (a *app) mcpServer() (*mcpserver.Server, error) {
	mb, err := a.Mailbox()
	if err != nil {
		return nil, err
	}
	dz, err := a.Dropzone()
	if err != nil {
		return nil, err
	}
	l, err := a.local()
	if err != nil {
		return nil, err
	}
	return mcpserver.New(mcpserver.Options{Mailbox: mb, Dropzone: dz, Local: l, Agent: a.explicitAgent(),
		Version: service.Version(), Logger: a.logger()}), nil
}

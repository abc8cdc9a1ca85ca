package main

import "github.com/spf13/cobra"

// serviceCommands are the commands of the running service (serve, status,
// doctor, fetch).
func (a *app) serviceCommands() []*cobra.Command { return nil }

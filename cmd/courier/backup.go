package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/backup"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
)

// backupCommand is `courier backup FILE.tar` (package backup), beside the
// service if it runs.
func (a *app) backupCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "backup FILE.tar",
		Short: "Write a consistent copy of the workspace (database, mailbox, dropzone, config) to a tar file, while the service runs",
		Long: `Write the workspace to a new tar file, while the service runs: the state
database through SQLite's online snapshot (VACUUM INTO) first, then the
mailbox's files and the dropzone's objects, so that every file the database
knows is in the tar. The config folder (.monoco/config) and the secret files
the config names that live in the workspace are in it too (it says which);
secrets outside the workspace are not. The service's socket, pid file and
logs never are. The tar is made 0600.

Restore: extract it into an empty folder (tar -xpf FILE.tar -C DIR), then
run 'courier --root DIR reindex' and 'courier --root DIR doctor'.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"text", "json"}); err != nil {
				return err
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			mb, dz, err := a.mailboxAndDropzone()
			if err != nil {
				return err
			}
			inside, outside := a.workspaceSecrets(cfg)
			rep, err := backup.Write(cmd.Context(), a.root, mb, dz, args[0], inside)
			if err != nil {
				return fault.Wrap(fault.CantCreate, err)
			}
			if format == "json" {
				return json.NewEncoder(a.stdout).Encode(struct {
					*backup.Report
					SecretsIncluded []string `json:"secrets_included"`
					SecretsLeftOut  []string `json:"secrets_left_out"`
				}{rep, a.rels(inside), outside})
			}
			fmt.Fprintf(a.stdout, "wrote %s: %d mailbox file(s) (%s), %d dropzone object(s) (%s), the state database (%s), %d config file(s), in %s\n",
				rep.Path, rep.Files, sizeString(rep.FileBytes), rep.Objects, sizeString(rep.ObjectBytes), sizeString(rep.DatabaseBytes),
				len(rep.ConfigFiles), rep.Duration.Round(1e6))
			if len(inside) > 0 {
				fmt.Fprintf(a.stdout, "it holds secrets (they live in the workspace): %s; keep it as private as the workspace\n", strings.Join(a.rels(inside), ", "))
			}
			if len(outside) > 0 {
				fmt.Fprintf(a.stdout, "not in it (outside the workspace; back them up on their own): %s\n", strings.Join(outside, ", "))
			}
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}

// workspaceSecrets splits the files holding secrets (the config itself
// when secrets are written into it, *_file keys, mcp.token_file) into
// those inside the workspace, which the backup takes, and the others.
func (a *app) workspaceSecrets(cfg *config.Config) (inside, outside []string) {
	files := secretFiles(cfg, a.root)
	if keys, err := cfg.InlineSecrets(); err == nil && len(keys) > 0 && cfg.Path != "" {
		files = append(files, cfg.Path)
	}
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(a.root, abs); err == nil && filepath.IsLocal(rel) {
			inside = append(inside, abs)
		} else {
			outside = append(outside, abs)
		}
	}
	return inside, outside
}

// rels returns paths relative to the workspace.
func (a *app) rels(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		r, _ := filepath.Rel(a.root, p)
		out[i] = filepath.ToSlash(r)
	}
	return out
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/retention"
	"github.com/monoco/courier/mailbox"
)

// pruneCommand is `courier prune`: package retention does the work, beside
// the service if it runs (it removes only files the service no longer
// writes, its rows go through SQLite's locking, and the dropzone's lock
// keeps it from an object the service is reusing).
func (a *app) pruneCommand() *cobra.Command {
	var olderThan, format string
	var dryRun bool
	c := &cobra.Command{
		Use:   "prune --older-than DURATION",
		Short: "Remove archived messages and delivered drafts older than DURATION, and the dropzone objects nothing else names",
		Long: `Remove what the archive holds for longer than DURATION (e.g. 90d, 36h):
messages marked done and delivered drafts (in archive/), their rows in the
state database, then the dropzone objects that no remaining file names and
that nothing used for as long (and at least an hour). Nothing in inbound/
(claimed or not), outbound/ or .deadletter/ is ever removed. It runs beside
the service; courier.retention.archive makes the service run it daily.
A prune that is interrupted loses nothing still referenced: run it again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"text", "json"}); err != nil {
				return err
			}
			if olderThan == "" {
				return usageError("--older-than is required (e.g. --older-than 90d)")
			}
			age, err := confkit.ParseDuration(olderThan)
			if err != nil || age <= 0 {
				return usageError("--older-than %q is not a positive duration (e.g. 90d, 36h)", olderThan)
			}
			mb, dz, err := a.mailboxAndDropzone()
			if err != nil {
				return err
			}
			rep, err := retention.Prune(cmd.Context(), mb, dz, retention.Options{OlderThan: age, DryRun: dryRun})
			if err != nil {
				return fault.Wrap(fault.IO, err)
			}
			if format == "json" {
				return json.NewEncoder(a.stdout).Encode(rep)
			}
			printPrune(a.stdout, a.stderr, rep)
			return nil
		},
	}
	c.Flags().StringVar(&olderThan, "older-than", "", "age from which archived files go: 90d, 36h, 30m...")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "list what would go, with counts and bytes, and remove nothing")
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}

func printPrune(w, ew io.Writer, rep *retention.Report) {
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
		for _, f := range rep.Files {
			fmt.Fprintf(w, "%s\t%s\n", f.Name, sizeString(f.Size))
		}
		for _, o := range rep.ObjectList {
			fmt.Fprintf(w, "dropzone %s\t%s\n", o.Name, sizeString(o.Size))
		}
	}
	fmt.Fprintf(w, "%s %d archived message(s) and %d delivered draft(s) filed before %s (%s), and %d dropzone object(s) (%s)\n",
		verb, rep.Messages, rep.Drafts, rep.Before.Format(time.RFC3339), sizeString(rep.FileBytes), rep.Objects, sizeString(rep.ObjectBytes))
	for _, s := range rep.Skipped {
		fmt.Fprintf(ew, "left alone: %s\n", s)
	}
}

// mailboxAndDropzone opens both, for the commands that keep them (prune,
// backup).
func (a *app) mailboxAndDropzone() (*mailbox.Mailbox, *dropzone.Store, error) {
	mb, err := a.Mailbox()
	if err != nil {
		return nil, nil, err
	}
	dz, err := a.Dropzone()
	return mb, dz, err
}

// sizeString writes a byte count for people: 512 B, 4.0 KiB, 1.3 MiB.
func sizeString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// startRetention runs courier.retention.archive inside the service: the
// first prune ten minutes after start (not in the rush of a start-up
// backfill), then daily.
func startRetention(ctx context.Context, cfg *config.Config, mb *mailbox.Mailbox, dz *dropzone.Store, log *slog.Logger) {
	age := cfg.Courier.Retention.Archive.D()
	if age <= 0 {
		return
	}
	log.Info("retention: the archive is pruned daily", "older_than", age)
	go retention.Daily(ctx, mb, dz, age, 10*time.Minute, log.With("component", "retention"))
}

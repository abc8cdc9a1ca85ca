package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/fault"
)

// sendFlags are send's options.
type sendFlags struct {
	provider, subject, text, replyTo, correlation, account, format string
	to, cc, bcc, attach                                            []string
	dryRun                                                         bool
}

func (a *app) sendCommand() *cobra.Command {
	var f sendFlags
	c := &cobra.Command{
		Use:   "send [DRAFT.md | -]",
		Short: "Validate a draft and queue it for delivery (the draft itself is left untouched)",
		Long: `Validate a draft and queue it in outbound/<provider>/ for the service to
deliver. Errors name the field and the line. The provider, recipients,
correlation id, thread and (email) reply headers are resolved from the
message answered (reply_to) when the draft does not give them.

Attachments: an artifact's path (relative to the draft's folder) and
--attach FILE (relative to the current folder) are copied into the
dropzone. They may name only a regular file beneath the workspace or a
folder of courier.outbound.attach_roots, reached without a symbolic link
that leads out of it; never under /proc, /sys or /dev, never in the
workspace's .monoco/, and no hidden file or folder (.env, .ssh, ...)
unless courier.outbound.attach_hidden is true. Anything else is refused
with exit 65, naming the field (or --attach) and why; nothing is queued
and nothing copied. --dry-run checks the same.

An email goes out from its account's first address; the draft's
email.from may name another of the account's own addresses (an alias),
and any other address is refused at that field. The service checks this
again before sending, for drafts that did not come through send.

Quick mode needs no file:  courier send --provider lark --to oc_123 --text "Fixed"`,
		Example: `  courier send reply.md
  courier send reply.md --dry-run
  courier send --reply-to email_3f2a9c0d1e2f3a4b5c6d --text "Thanks, on it."
  courier send --reply-to email_3f2a9c0d1e2f3a4b5c6d --text "The report." --attach report.pdf`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(f.format, []string{"text", "json"}); err != nil {
				return err
			}
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			if file == "" && f.text == "" {
				return usageError("give a draft file, or --text for a quick message")
			}
			return a.send(cmd.Context(), file, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.provider, "provider", "", "email, lark or slack (default: from the draft, the message answered, or the recipients)")
	fl.StringSliceVar(&f.to, "to", nil, "recipients (replace the draft's)")
	fl.StringSliceVar(&f.cc, "cc", nil, "cc recipients (email)")
	fl.StringSliceVar(&f.bcc, "bcc", nil, "bcc recipients (email)")
	fl.StringVar(&f.subject, "subject", "", "subject (email)")
	fl.StringVar(&f.text, "text", "", "the message text (quick mode without a draft file)")
	fl.StringVar(&f.replyTo, "reply-to", "", "id of the message answered")
	fl.StringArrayVar(&f.attach, "attach", nil, "attach a file, or a dropzone object by its sha256:... id (repeatable; added to the draft's)")
	fl.StringVar(&f.correlation, "correlation", "", "correlation id")
	fl.StringVar(&f.account, "account", "", "email account to send from (default: the one the message answered came to, else the first)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "validate and resolve, print the draft as it would be queued, queue nothing")
	fl.StringVar(&f.format, "format", "text", "text or json")
	return c
}

func (a *app) send(ctx context.Context, file string, f sendFlags) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	d := &agents.Draft{Name: "draft", Agent: a.explicitAgent(), Flags: agents.Flags{Provider: f.provider, To: f.to, Cc: f.cc, Bcc: f.bcc,
		Subject: f.subject, Text: f.text, ReplyTo: f.replyTo, Correlation: f.correlation, Account: f.account, Attach: f.attach, DryRun: f.dryRun}}
	d.BaseDir, _ = os.Getwd()
	if file != "" {
		if d.Data, err = a.readDraft(file, cfg.Courier.Limits.MaxDraftBytes); err != nil {
			return err
		}
		if file != "-" {
			d.Name = file
			d.BaseDir = filepath.Dir(file)
		}
	}
	l, err := a.local()
	if err != nil {
		return err
	}
	res, err := l.Send(ctx, d)
	if err != nil {
		return err
	}
	if w := agents.WaitingWarning(res); w != "" {
		fmt.Fprintf(a.stderr, "%s%s\n", errPrefix, w)
	}
	return a.printSent(res, f.format)
}

// printSent prints what send did, the same whoever queued the draft.
func (a *app) printSent(res *agentapi.SendResult, format string) error {
	switch {
	case format == "json":
		out, err := agents.SentJSON(res)
		if err == nil {
			_, err = a.stdout.Write(out)
		}
		return err
	case res.DryRun:
		fmt.Fprintf(a.stdout, "# dry run: %s would be queued in outbound/%s/ as:\n", res.ID, res.Provider)
		_, err := io.WriteString(a.stdout, res.File)
		return err
	}
	fmt.Fprintf(a.stdout, "queued %s -> %s%s\n", res.ID, res.Path, agents.AwaitingNote(res))
	return nil
}

// readDraft reads a draft, refusing one over the size limit before reading
// it whole.
func (a *app) readDraft(file string, limit int64) ([]byte, error) {
	var r io.Reader
	if file == "-" {
		r = a.stdin
	} else {
		fd, err := os.Open(file)
		if err != nil {
			return nil, fault.Wrap(fault.NoInput, err)
		}
		defer fd.Close()
		if fi, err := fd.Stat(); err == nil && fi.IsDir() {
			return nil, fault.Wrap(fault.NoInput, fmt.Errorf("%s is a directory, not a draft", file))
		}
		r = fd
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fault.Wrap(fault.IO, err)
	}
	if int64(len(data)) > limit {
		return nil, fault.Wrap(fault.Invalid, fmt.Errorf("%s: draft is over the size limit of %d bytes (courier.limits.max_draft_bytes); attach large content as an artifact", file, limit))
	}
	return data, nil
}

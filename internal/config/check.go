package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// minTextBytes is the smallest max_text_bytes: a file keeps at least the
// start of a long mail.
const minTextBytes = 4096

// validate checks values in the order of the file's sections: the
// service's own, each provider's (its Check, in the table's order), the
// hooks. Without secrets, the checks about secrets being there are left
// out.
func (c *Config) validate(line func(string) int, secrets bool) schema.Errors {
	k := confkit.NewChecker(line, secrets)
	checkService(k, &c.Courier)
	c.Courier.Adapters.each("courier.adapters", func(p string, s confkit.Section) { s.Check(k.At(p)) })
	checkNotify(k, c.Courier.Notify)
	return k.Errors()
}

// checkService checks the service's own sections: http, mcp, socket, log,
// systemd, debounce, limits, outbound and restart.
func checkService(k *confkit.Checker, cc *Courier) {
	if err := confkit.ListenAddr(cc.HTTP.Listen); err != nil {
		k.Bad("courier.http.listen", "%v", err)
	}
	if m := cc.MCP; m.MaxSessions < 0 || m.SessionTimeout < 0 || m.MaxRequestBytes < 0 {
		k.Bad("courier.mcp", "max_sessions, session_timeout and max_request_bytes must not be negative")
	}
	if p := cc.MCP.TokenFile; strings.HasPrefix(p, "~") {
		k.Bad("courier.mcp.token_file", "%q: ~ is not expanded here; write the absolute path", p)
	}
	switch p := cc.Socket.Path; {
	case strings.HasPrefix(p, "~"):
		k.Bad("courier.socket.path", "%q: ~ is not expanded here; write the absolute path", p)
	case strings.HasSuffix(p, "/") || strings.ContainsRune(p, 0):
		k.Bad("courier.socket.path", "%q is not a file path", p)
	}
	switch cc.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		k.Bad("courier.log.level", "%q is not one of debug, info, warn, error", cc.Log.Level)
	}
	switch cc.Log.Format {
	case "", "text", "json":
	default:
		k.Bad("courier.log.format", "%q is not one of text, json", cc.Log.Format)
	}
	if cc.Log.MaxSizeMB < 0 || cc.Log.MaxFiles < 0 {
		k.Bad("courier.log", "max_size_mb and max_files must not be negative (the log is always bounded)")
	}
	if strings.HasPrefix(cc.Log.File, "~") || strings.HasSuffix(cc.Log.File, "/") || strings.ContainsRune(cc.Log.File, 0) {
		k.Bad("courier.log.file", "%q is not a file path (~ is not expanded)", cc.Log.File)
	}
	if u := cc.Systemd.Unit; u != "" && (strings.ContainsAny(u, "/ \\") || strings.HasPrefix(u, "-")) {
		k.Bad("courier.systemd.unit", "%q is not a unit name (such as courier.service)", u)
	}
	if cc.Debounce.WindowMS < 0 || cc.Debounce.MaxWaitMS < 0 {
		k.Bad("courier.debounce", "times must not be negative")
	}
	if cc.Limits.MaxDraftBytes < 0 || cc.Limits.MaxArtifactBytes < 0 || cc.Limits.MaxMessageBytes < 0 {
		k.Bad("courier.limits", "limits must not be negative")
	}
	if t := cc.Limits.MaxTextBytes; t < minTextBytes || t > schema.MaxReadText {
		// Above the bound, `read`, reindex and `send` would cut the text
		// of new files as they do that of files written before it.
		k.Bad("courier.limits.max_text_bytes", "%d is not between %d and %d (what every reader of a message file takes from it)", t, minTextBytes, schema.MaxReadText)
	}
	if cc.Limits.NormalizeConcurrency < 0 {
		k.Bad("courier.limits.normalize_concurrency", "must not be negative (0: one a CPU, at most 4)")
	}
	if d := cc.Mailbox.DeadLetter; d.MaxFiles < 0 || d.MaxBytes < 0 {
		k.Bad("courier.mailbox.deadletter", "max_files and max_bytes must not be negative (0: 1000 files, 64 MiB)")
	}
	if cc.Outbound.MaxAttempts < 1 {
		k.Bad("courier.outbound.max_attempts", "must be at least 1")
	}
	if cc.Outbound.Concurrency < 1 {
		k.Bad("courier.outbound.concurrency", "must be at least 1")
	}
	if m := cc.Claims.MaxTimeout; m < 0 {
		k.Bad("courier.claims.max_timeout", "must not be negative")
	} else if cc.Mailbox.ClaimTimeout > m {
		k.Bad("courier.mailbox.claim_timeout", "%v is longer than courier.claims.max_timeout (%v)", cc.Mailbox.ClaimTimeout.D(), m.D())
	}
	if a := cc.Retention.Archive.D(); a != 0 && a < time.Hour {
		k.Bad("courier.retention.archive", "%v is shorter than an hour (0 or left out: keep the archive forever)", a)
	}
	checkApproval(k, &cc.Outbound)
	if cc.Outbound.MaxRecipients < 1 {
		k.Bad("courier.outbound.max_recipients", "must be at least 1")
	}
	for i, r := range cc.Outbound.AttachRoots {
		checkAttachRoot(k, fmt.Sprintf("courier.outbound.attach_roots[%d]", i), r)
	}
	if r := cc.Restart; r.Refused.D() < time.Second {
		k.Bad("courier.restart.refused", "%v is less than a second: refused credentials asked for again at once would flood the provider", r.Refused.D())
	} else if r.RefusedMax < r.Refused {
		k.Bad("courier.restart.refused_max", "%v is less than refused (%v)", r.RefusedMax.D(), r.Refused.D())
	}
}

// checkAttachRoot checks one folder of outbound.attach_roots. Lexically only:
// `courier send` opens it, and says so if it cannot.
func checkAttachRoot(k *confkit.Checker, path, r string) {
	switch {
	case strings.TrimSpace(r) == "":
		k.Bad(path, "empty folder")
	case strings.HasPrefix(r, "~"):
		k.Bad(path, "%q: ~ is not expanded here; write the folder's absolute path", r)
	default:
		for _, sys := range []string{"/proc", "/sys", "/dev"} {
			if c := filepath.Clean(r); c == sys || strings.HasPrefix(c, sys+"/") {
				k.Bad(path, "%q is under %s, whose files are never attached", r, sys)
			}
		}
	}
}

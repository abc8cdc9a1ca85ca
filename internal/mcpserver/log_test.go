package mcpserver

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// The go-sdk's info lines (a "resource updated notification sent" for
// every batch of mail, subscribers or not) show in the service's log only
// at debug; its warnings and errors at every level.
func TestSDKLogQuietBelowDebug(t *testing.T) {
	for _, c := range []struct {
		level      slog.Level
		info, warn bool
	}{
		{slog.LevelInfo, false, true},
		{slog.LevelWarn, false, true},
		{slog.LevelError, false, false},
		{slog.LevelDebug, true, true},
	} {
		var b strings.Builder
		log := slog.New(sdkLog{slog.NewTextHandler(&b, &slog.HandlerOptions{Level: c.level})}).With("component", "mcp")
		log.Info("resource updated notification sent")
		log.WarnContext(context.Background(), "session lost")
		if got := strings.Contains(b.String(), "notification sent"); got != c.info {
			t.Errorf("service at %v: info line shown %v, want %v", c.level, got, c.info)
		}
		if got := strings.Contains(b.String(), "session lost"); got != c.warn {
			t.Errorf("service at %v: warning shown %v, want %v", c.level, got, c.warn)
		}
		if c.info && !strings.Contains(b.String(), "component=mcp") {
			t.Errorf("attributes lost: %s", b.String())
		}
	}
}

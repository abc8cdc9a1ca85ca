package config_test

import (
	"testing"
	"time"

	"github.com/monoco/courier/internal/config"
)

// courier.retention.archive: off by default, a duration (days too), at
// least an hour.
func TestRetentionConfig(t *testing.T) {
	cfg, err := config.Parse([]byte("courier: {}\n"), t.TempDir(), nil)
	if err != nil || cfg.Courier.Retention.Archive != 0 {
		t.Fatalf("default: %v %v", cfg.Courier.Retention.Archive, err)
	}
	cfg, err = config.Parse([]byte("courier:\n  retention: {archive: 90d}\n"), t.TempDir(), nil)
	if err != nil || cfg.Courier.Retention.Archive.D() != 90*24*time.Hour {
		t.Errorf("90d: %v %v", cfg.Courier.Retention.Archive.D(), err)
	}
	parseErr(t, "courier:\n  retention: {archive: 10m}\n", "courier.retention.archive: 10m0s is shorter than an hour")
	parseErr(t, "courier:\n  retention: {archive: 90days}\n", `"90days" is not a duration`)
}

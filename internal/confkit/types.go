package confkit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as "60s", "5m" or a number of
// seconds.
type Duration time.Duration

// UnmarshalYAML accepts "90s", "1m30s" or 90 (seconds).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a duration such as 60s", n.Line)}}
	}
	if secs, err := strconv.ParseFloat(n.Value, 64); err == nil {
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration (want e.g. 60s, 5m, 90d, or seconds)", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// ParseDuration is time.ParseDuration that also takes whole days, "90d"
// (24 h each), as retention is counted.
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (want e.g. 90d, 36h, 30m)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (want e.g. 90d, 36h, 30m)", s)
	}
	return d, nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Date is a day, written 2026-01-01.
type Date struct{ time.Time }

// UnmarshalYAML accepts YYYY-MM-DD or an RFC 3339 time.
func (d *Date) UnmarshalYAML(n *yaml.Node) error {
	for _, layout := range []string{"2006-01-02", time.RFC3339} {
		if t, err := time.Parse(layout, n.Value); err == nil {
			d.Time = t
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a date (want YYYY-MM-DD)", n.Line, n.Value)}}
}

// Limits bounds what Courier accepts: courier.limits, which internal/config
// reads, defaults and checks, and hands every provider.
type Limits struct {
	MaxDraftBytes    int64 `yaml:"max_draft_bytes"`
	MaxArtifactBytes int64 `yaml:"max_artifact_bytes"`
	MaxMessageBytes  int64 `yaml:"max_message_bytes"` // a whole inbound email
	// MaxTextBytes is how much decoded text one inbound message file
	// keeps (content.text, content.html, content.markdown and the body
	// together); the rest of each goes on in text artifacts, so a 120 MB
	// HTML mail is a file an agent can read and nothing is lost.
	MaxTextBytes int64 `yaml:"max_text_bytes"`
	// NormalizeConcurrency is how many inbound messages are parsed and
	// rendered at once, across the receivers and IMAP accounts; each takes
	// memory in proportion to max_text_bytes. 0: one a CPU, at most 4.
	NormalizeConcurrency int `yaml:"normalize_concurrency"`
}

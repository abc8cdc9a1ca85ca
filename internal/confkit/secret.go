package confkit

import (
	"encoding/json"
	"log/slog"
)

// Secret is a credential. It formats as "[redacted]" everywhere; Reveal
// returns the value.
//
// A config section declares a secret by its fields alone: a field of type
// Secret with YAML key x and, beside it, a string field with key x_file for
// its file form (systemd credentials, Docker secrets), read relative to the
// config file's folder unless absolute.
type Secret string

// Reveal returns the secret's value, for the code that uses it.
func (s Secret) Reveal() string { return string(s) }

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString hides the value from %#v.
func (s Secret) GoString() string { return s.String() }

// LogValue hides the value from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON hides the value from JSON (slog's JSON handler, status
// output).
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText hides the value from every text encoder.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML hides the value when a config is written back.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

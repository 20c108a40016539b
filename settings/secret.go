package settings

import (
	"log/slog"
	"strconv"
)

// Secret is a setting that must not be shown: a password, or a URL that
// may hold one. fmt, log/slog, encoding/json and the like print a
// placeholder in its place; Reveal returns the value itself, for the one
// place that needs it. Declare such a field with the tag secret:"true"
// too, so that a setting error never quotes it.
type Secret string

// redacted is what a Secret shows instead of its value.
const redacted = "[redacted]"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String returns a placeholder, or "" when the secret is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString returns a placeholder, also for %#v.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// LogValue returns a placeholder for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText returns a placeholder, for encoding/json and the like.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText takes the secret as given.
func (s *Secret) UnmarshalText(b []byte) error {
	*s = Secret(b)
	return nil
}

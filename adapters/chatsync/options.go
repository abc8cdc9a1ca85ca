package chatsync

import (
	"log/slog"
	"net/http"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/confkit"
)

// Options configure a chat provider whose section of the config is C
// (its Config): what its New takes. The zero value is a disabled
// provider.
type Options[C any] struct {
	// Config is the provider's section of the config
	// (courier.adapters.<name>).
	Config C
	// Limits bound what is received and sent.
	Limits confkit.Limits
	// Dropzone stores the files of messages; nil for a provider that only
	// resolves drafts.
	Dropzone *dropzone.Store
	// Logger is tagged with the provider's name; nil discards.
	Logger *slog.Logger
	// HTTPClient carries every API call and file transfer; nil uses one
	// with timeouts.
	HTTPClient *http.Client
}

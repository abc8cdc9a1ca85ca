package providers

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Env is what every provider is built with besides its config.
type Env struct {
	Log      *slog.Logger    // nil discards
	Dropzone *dropzone.Store // nil for commands that only resolve drafts
	Progress io.Writer       // backfill progress on a terminal; nil is silent
}

// A Row is one provider Courier can run: its name, its config section and
// its constructor.
type Row struct {
	Name schema.Provider
	// Config returns the provider's Config, empty: internal/config decodes
	// courier.adapters.<Name> into it, and applies its defaults and
	// checks. Nil for a provider without a section.
	Config func() confkit.Section
	// New builds the provider from the whole config (its section is its
	// package's ConfigOf(cfg)) and env. It does no I/O.
	New func(cfg *config.Config, env Env) (*adapters.Provider, error)
}

// Table is the providers Courier runs, one row each, in the order their
// sections, sources and checks go: an explicit table, as matterbridge's
// router takes its bridge map, with no registry filled by init().
// internal/providers/all holds Courier's.
type Table []Row

// Adapters returns the table as internal/config reads it: the providers'
// names and the constructors of their sections (LoadOptions.Adapters).
func (t Table) Adapters() []config.Adapter {
	out := make([]config.Adapter, 0, len(t))
	for _, r := range t {
		out = append(out, config.Adapter{Name: r.Name, Config: r.Config})
	}
	return out
}

// Build builds every provider of the table from cfg. A provider that is
// not enabled still resolves drafts (they stay queued for it) and runs
// nothing.
func (t Table) Build(cfg *config.Config, env Env) (Set, error) {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	var set Set
	for _, row := range t {
		if row.Config != nil && cfg.Section(row.Name) == nil {
			return nil, fmt.Errorf("provider table: the config has no section for %s (it was read without this table's Adapters)", row.Name)
		}
		p, err := row.New(cfg, env)
		if err != nil {
			return nil, err
		}
		if p.Name != row.Name {
			return nil, fmt.Errorf("provider table: the row for %s built a provider named %s", row.Name, p.Name)
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		set = append(set, p)
	}
	return set, nil
}

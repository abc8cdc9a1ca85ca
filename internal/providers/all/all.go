// Package all is Courier's provider table: every provider it runs, one
// row each (a providers.Row: its name, its config section, its
// constructor), as matterbridge's bridgemap lists its bridges. Adding a
// provider is its package and one row here: internal/config takes the
// sections from the table (Table.Adapters) and names no provider, and
// mailbox, ingest, outbound and the service know providers only by name.
package all

import (
	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/email"
	"github.com/monoco/courier/adapters/lark"
	"github.com/monoco/courier/adapters/slack"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/schema"
)

// Table is every provider Courier runs. cmd/courier reads the config with
// its Adapters and builds the providers with its Build.
var Table = providers.Table{
	{Name: schema.Email, Config: func() confkit.Section { return new(email.Config) },
		New: func(cfg *config.Config, env providers.Env) (*adapters.Provider, error) {
			return email.New(email.Options{Config: *email.ConfigOf(cfg), Limits: cfg.Courier.Limits,
				Dropzone: env.Dropzone, Logger: env.Log, Progress: env.Progress})
		}},
	{Name: schema.Lark, Config: func() confkit.Section { return new(lark.Config) },
		New: func(cfg *config.Config, env providers.Env) (*adapters.Provider, error) {
			return lark.New(lark.Options{Config: *lark.ConfigOf(cfg), Limits: cfg.Courier.Limits, Dropzone: env.Dropzone, Logger: env.Log})
		}},
	{Name: schema.Slack, Config: func() confkit.Section { return new(slack.Config) },
		New: func(cfg *config.Config, env providers.Env) (*adapters.Provider, error) {
			return slack.New(slack.Options{Config: *slack.ConfigOf(cfg), Limits: cfg.Courier.Limits, Dropzone: env.Dropzone, Logger: env.Log})
		}},
}

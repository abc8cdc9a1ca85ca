// Package providers holds the providers one config built (Set): what the
// service asks of them all (their sources, senders, webhooks, health, the
// bot's own ids, their secrets) and what the writing verbs ask of them (the
// provider a draft's recipients belong to, why its drafts would wait).
// A Table (the provider table, internal/providers/all) builds a Set;
// nothing here names a provider.
package providers

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Set is every provider of the table, built from one config, in the
// table's order.
type Set []*adapters.Provider

// Get returns the provider named p.
func (s Set) Get(p schema.Provider) *adapters.Provider {
	for _, x := range s {
		if x.Name == p {
			return x
		}
	}
	return nil
}

// Names lists the providers, for messages.
func (s Set) Names() string {
	names := make([]string, len(s))
	for i, p := range s {
		names[i] = string(p.Name)
	}
	return strings.Join(names, ", ")
}

// Guess tells the provider from recipient ids when one provider
// recognises every one of them.
func (s Set) Guess(to []string) schema.Provider {
	if len(to) == 0 {
		return ""
	}
	var found schema.Provider
	for _, p := range s {
		all := true
		for _, r := range to {
			if !p.Resolver.Recognizes(r) {
				all = false
				break
			}
		}
		if all {
			if found != "" {
				return "" // two providers claim them: the draft must say
			}
			found = p.Name
		}
	}
	return found
}

// Sources returns every provider's sources, in table order.
func (s Set) Sources() []adapters.Source {
	var out []adapters.Source
	for _, p := range s {
		out = append(out, p.Sources...)
	}
	return out
}

// Senders returns the providers that can send.
func (s Set) Senders() map[schema.Provider]adapters.Sender {
	out := map[schema.Provider]adapters.Sender{}
	for _, p := range s {
		if p.Sender != nil {
			out[p.Name] = p.Sender
		}
	}
	return out
}

// Waiting says, per provider that runs but cannot send, why.
func (s Set) Waiting() map[schema.Provider]string {
	out := map[schema.Provider]string{}
	for _, p := range s {
		if p.Sender == nil && p.Waiting != "" {
			out[p.Name] = p.Waiting
		}
	}
	return out
}

// Undelivered says why nothing will deliver a draft for p while the
// config stays as it is; "" when a Sender will take it.
func (s Set) Undelivered(p schema.Provider) string {
	for _, x := range s {
		switch {
		case x.Name != p || x.Sender != nil:
		case x.Waiting != "":
			return x.Waiting
		default:
			return fmt.Sprintf("courier.adapters.%s is not enabled, so its drafts stay queued until it is", p)
		}
	}
	return ""
}

// Health returns the /health entry of every provider that reports one.
func (s Set) Health() map[string]adapters.HealthReporter {
	out := map[string]adapters.HealthReporter{}
	for _, p := range s {
		if p.Health != nil {
			out[string(p.Name)] = p.Health
		}
	}
	return out
}

// Ignored returns, per provider that counts them, the inbound events it
// does not file on purpose.
func (s Set) Ignored() map[schema.Provider]*adapters.Ignored {
	out := map[schema.Provider]*adapters.Ignored{}
	for _, p := range s {
		if p.Ignored != nil {
			out[p.Name] = p.Ignored
		}
	}
	return out
}

// Self lists, per provider, the bot's own participant ids.
func (s Set) Self() map[schema.Provider][]string {
	out := map[schema.Provider][]string{}
	for _, p := range s {
		if len(p.Self) > 0 {
			out[p.Name] = p.Self
		}
	}
	return out
}

// Webhooks returns the handlers to mount, each at /webhook/<provider>,
// given sink.
func (s Set) Webhooks(sink adapters.Sink) map[string]http.Handler {
	out := map[string]http.Handler{}
	for _, p := range s {
		if p.Webhook != nil {
			out["/webhook/"+string(p.Name)] = p.Webhook.Handler(sink)
		}
	}
	return out
}

// Checks returns what doctor asks of every provider.
func (s Set) Checks() []adapters.Check {
	var out []adapters.Check
	for _, p := range s {
		out = append(out, p.Checks...)
	}
	return out
}

// Secrets returns the credentials the providers hold.
func (s Set) Secrets() []confkit.Secret {
	var out []confkit.Secret
	for _, p := range s {
		out = append(out, p.Secrets...)
	}
	return out
}

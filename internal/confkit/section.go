package confkit

import "github.com/monoco/courier/schema"

// Section is a provider's part of the config, courier.adapters.<name>: the
// provider package's Config, as a pointer. internal/config decodes the
// section into it strictly (an unknown key is an error naming its key and
// line), reads its secrets, then calls Normalize (when it is a Normalizer),
// Defaults and Check. A provider whose key the file leaves out gets its
// Config with nothing set, defaults applied and checked all the same.
type Section interface {
	// Defaults fills in what the file left out.
	Defaults()
	// Check reports what is wrong through k, whose keys are relative to
	// the section: k.Bad("accounts[0].smtp.port", ...) names
	// courier.adapters.email.accounts[0].smtp.port. Checks about secrets
	// being there run only when k.Secrets() (the commands agents run read
	// the config without them).
	Check(k *Checker)
}

// A Normalizer rewrites what its section was given before the defaults
// apply, its secrets already read (email: upstream's flat single-account
// keys become the account "default"). An error it reports through k ends
// the reading before any check runs.
type Normalizer interface {
	Normalize(k *Checker)
}

// An EmbeddedDefaulter sets what its section is when the workspace has no
// config file (internal/config's Default), before the defaults apply:
// email turns on its receiver on 127.0.0.1:2525.
type EmbeddedDefaulter interface {
	EmbeddedDefault()
}

// Sections gives a provider its section of a config; internal/config's
// *Config is one. A provider package's ConfigOf(Sections) returns its own
// Config from it, typed.
type Sections interface {
	// Section returns the section of provider name, nil when the config
	// has none (it was read without that provider in its table).
	Section(name schema.Provider) Section
}

// SectionOf returns the section of provider name in s as a T (a pointer
// to the provider's Config), the zero T when s has none of that type: a
// provider's ConfigOf is SectionOf[*Config](s, its name).
func SectionOf[T Section](s Sections, name schema.Provider) T {
	t, _ := s.Section(name).(T)
	return t
}

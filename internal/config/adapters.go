package config

import (
	"errors"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// An Adapter is a provider as the config knows it: its name, which is the
// key of its section under courier.adapters, and a constructor of its
// section's Config, empty (a pointer to the provider package's Config).
// The provider table lists one for each provider; Load takes them in
// LoadOptions.Adapters.
type Adapter struct {
	Name   schema.Provider
	Config func() confkit.Section
}

// Adapters holds courier.adapters: one section for each Adapter the config
// was read with, in their order, each its provider's Config. A provider
// the file leaves out has its Config all the same, with its defaults.
type Adapters struct {
	table    []Adapter
	sections []confkit.Section // sections[i] is table[i]'s
	node     *yaml.Node        // courier.adapters as written, until decode
	// unenabled are the sections with settings and no enabled key
	// (Config.Unenabled).
	unenabled []string
}

var _ confkit.Sections = (*Config)(nil)

// newConfig returns a config with an empty section for each adapter.
func newConfig(table []Adapter) *Config {
	c := &Config{}
	a := &c.Courier.Adapters
	for _, ad := range table {
		if ad.Config == nil {
			continue // a provider without a section of its own
		}
		a.table = append(a.table, ad)
		a.sections = append(a.sections, ad.Config())
	}
	return c
}

// Section returns the section of provider name, nil when the config was
// read without that provider (or it has none).
func (c *Config) Section(name schema.Provider) confkit.Section {
	a := &c.Courier.Adapters
	if i := a.index(name); i >= 0 {
		return a.sections[i]
	}
	return nil
}

// UnmarshalYAML keeps the node of courier.adapters for decode, which
// knows the providers' types; anything but a mapping is a type error.
func (a *Adapters) UnmarshalYAML(n *yaml.Node) error {
	var m map[string]yaml.Node
	if err := n.Decode(&m); err != nil {
		return err
	}
	a.node = n
	return nil
}

// decode decodes each section under courier.adapters (at path) into its
// provider's Config, as strictly as the rest of the file: a key that no
// provider of the table has is an unknown key.
func (a *Adapters) decode(path string) schema.Errors {
	n := a.node
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	names := make([]string, len(a.table))
	for i, ad := range a.table {
		names[i] = string(ad.Name)
	}
	var errs schema.Errors
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		p := joinKey(path, key.Value)
		j := a.index(schema.Provider(key.Value))
		if j < 0 {
			errs = append(errs, &schema.FieldError{Line: key.Line, Path: p, Msg: schema.UnknownField(key.Value, names)})
			continue
		}
		if err := schema.DecodeNodeAt(value, p, a.sections[j]); err != nil {
			var es schema.Errors
			if !errors.As(err, &es) {
				es = schema.Errors{{Line: value.Line, Path: p, Msg: err.Error()}}
			}
			errs = append(errs, es...)
		}
	}
	return errs
}

func (a *Adapters) index(name schema.Provider) int {
	for i, ad := range a.table {
		if ad.Name == name {
			return i
		}
	}
	return -1
}

// each calls f with the path and the Config of every section, in the
// table's order.
func (a *Adapters) each(path string, f func(path string, s confkit.Section)) {
	for i, ad := range a.table {
		f(joinKey(path, string(ad.Name)), a.sections[i])
	}
}

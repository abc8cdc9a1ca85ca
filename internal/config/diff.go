package config

import (
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Diff names the keys whose values differ between old and new, each as
// deep as a reload acts on it: courier.adapters.<provider> (a provider's
// whole section), courier.notify (every hook), courier.<section>.<key>
// for the other sections (courier.http.listen), courier.<key> for the
// rest (courier.root). Secrets compare by value: a password_file
// whose content changed changes its section.
func Diff(old, new *Config) []string {
	var out []string
	ov, nv := reflect.ValueOf(old.Courier), reflect.ValueOf(new.Courier)
	t := ov.Type()
	for i := range t.NumField() {
		key := "courier." + yamlName(t.Field(i))
		switch {
		case key == "courier.adapters":
			old.Courier.Adapters.each(key, func(path string, s confkit.Section) {
				if !reflect.DeepEqual(s, new.Section(schema.Provider(path[len(key)+1:]))) {
					out = append(out, path)
				}
			})
		case ov.Field(i).Kind() == reflect.Struct:
			out = append(out, diffFields(key, ov.Field(i), nv.Field(i))...)
		case !reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()):
			out = append(out, key)
		}
	}
	return out
}

// diffFields names the fields of two structs that differ.
func diffFields(path string, a, b reflect.Value) []string {
	var out []string
	for i := range a.Type().NumField() {
		f := a.Type().Field(i)
		if f.IsExported() && !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			out = append(out, path+"."+yamlName(f))
		}
	}
	return out
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

// Unenabled names the providers' sections the file gives settings to but
// no enabled key: such a provider is off, whatever its settings say, which
// a hand-written config rarely means (courier.adapters.<name>.enabled, for
// doctor to tell). A section that says enabled: false is off on purpose.
func (c *Config) Unenabled() []string { return c.Courier.Adapters.unenabled }

// findUnenabled fills Adapters.unenabled from the file's nodes.
func (a *Adapters) findUnenabled(root *yaml.Node) {
	a.unenabled = nil
	for _, ad := range a.table {
		name := string(ad.Name)
		if !hasKey(root, "courier", "adapters", name) || hasKey(root, "courier", "adapters", name, "enabled") {
			continue
		}
		if n := valueAt(root, "courier", "adapters", name); n != nil && n.Kind == yaml.MappingNode && len(n.Content) > 0 {
			a.unenabled = append(a.unenabled, "courier.adapters."+name+".enabled")
		}
	}
}

// valueAt is the node at path under root, nil when there is none.
func valueAt(n *yaml.Node, path ...string) *yaml.Node {
	for _, k := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

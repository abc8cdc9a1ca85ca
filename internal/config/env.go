package config

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/schema"
)

// expandEnv replaces ${NAME} in every scalar value. Without secrets, the
// values of secret keys are emptied instead.
func expandEnv(n *yaml.Node, path string, secrets bool, keys secretKeySet) schema.Errors {
	var errs schema.Errors
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := joinKey(path, n.Content[i].Value)
			errs = append(errs, expandEnv(n.Content[i+1], p, secrets, keys)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			errs = append(errs, expandEnv(c, fmt.Sprintf("%s[%d]", path, i), secrets, keys)...)
		}
	case yaml.ScalarNode:
		if !secrets && keys.has(path) {
			n.Value, n.Tag, n.Style = "", "!!str", 0
			return nil
		}
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		var missing []string
		v := expand(n.Value, func(name string) (string, bool) {
			val, ok := os.LookupEnv(name)
			if !ok {
				missing = append(missing, name)
			}
			return val, ok
		})
		if len(missing) > 0 {
			errs = append(errs, &schema.FieldError{Line: n.Line, Path: path,
				Msg: "environment variable " + strings.Join(missing, ", ") + " is not set"})
			return errs
		}
		n.Value = v
		if n.Style == 0 {
			n.Tag = resolveTag(v) // a plain ${PORT} becomes the number it holds
		}
	}
	return errs
}

// expand replaces ${NAME} only (a bare $ is left alone: passwords have
// them).
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		name := s[i+2 : i+j]
		v, _ := lookup(name)
		b.WriteString(v)
		s = s[i+j+1:]
	}
}

func resolveTag(v string) string {
	var x any
	if err := yaml.Unmarshal([]byte(v), &x); err != nil {
		return "!!str"
	}
	switch x.(type) {
	case int, int64, uint64:
		return "!!int"
	case bool:
		return "!!bool"
	case float64:
		return "!!float"
	}
	return "!!str"
}

package config

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/schema"
)

// InlineSecrets returns the keys of the secrets written into c's file
// itself (c.Path, read again as written): a secret key, the providers'
// included, with a value that is not made only of ${NAME} references. A
// *_file form names a file and ${NAME} an environment variable; neither
// puts the secret in the config, which agents read too (their commands
// load it, without secrets).
func (c *Config) InlineSecrets() ([]string, error) {
	path := c.Path
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	root, err := schema.YAMLNode(data)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	keys := secretKeys(c.Courier.Adapters.table)
	var out []string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], joinKey(path, n.Content[i].Value))
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.ScalarNode:
			if !strings.HasSuffix(path, "_file") && keys.has(path) && literal(n.Value) {
				out = append(out, path)
			}
		}
	}
	walk(root, "")
	return out, nil
}

// literal reports whether a value holds text of its own besides ${NAME}
// references.
func literal(v string) bool {
	rest := expand(v, func(string) (string, bool) { return "", true })
	return strings.TrimSpace(rest) != ""
}

package config

import (
	"reflect"

	"github.com/monoco/courier/internal/confkit"
)

// SecretKey is secretKeys(adapters).has, for the external tests that drive
// it through the provider table.
func SecretKey(adapters []Adapter) func(path string) bool { return secretKeys(adapters).has }

// FillShape gives every pointer of c, its providers' sections included, a
// value and every list one item (fillShape).
func FillShape(c *Config) {
	fillShape(reflect.ValueOf(c).Elem())
	c.Courier.Adapters.each("", func(_ string, s confkit.Section) { fillShape(reflect.ValueOf(s)) })
}

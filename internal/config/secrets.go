package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// SecretRef is one secret of a config, as Secrets finds it.
type SecretRef struct {
	// Path is the secret's key, as errors name it:
	// "courier.adapters.email.accounts[0].smtp.password". Its file form
	// is Path+"_file".
	Path string
	// Secret is the secret's field in the config.
	Secret *confkit.Secret
	// File is the value of the *_file form, as written ("" when unset):
	// relative to the config file's folder unless absolute.
	File string
}

var (
	secretType   = reflect.TypeFor[confkit.Secret]()
	adaptersType = reflect.TypeFor[Adapters]()
)

// Secrets returns every secret of c, in field order, through the accounts
// and sections c has, the providers' sections (courier.adapters.<name>,
// in the table's order) included. A secret is declared by its field alone
// (confkit.Secret): a field of type Secret with YAML key x and, beside it,
// a string field with key x_file for its file form. Reading the files
// (Parse), leaving secrets out for the commands that run without them
// (LoadOptions.Secrets) and doctor's checks all go by this list.
func (c *Config) Secrets() []SecretRef {
	var out []SecretRef
	walkSecrets(reflect.ValueOf(c).Elem(), "", &out)
	return out
}

// walkSecrets appends the secrets in v, an addressable value at path.
// Pointers are followed and lists entered; maps hold no secrets. The
// providers' sections, which Adapters holds as interfaces, are entered
// each at its key.
func walkSecrets(v reflect.Value, path string, out *[]SecretRef) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkSecrets(v.Elem(), path, out)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkSecrets(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Struct:
		if v.Type() == adaptersType {
			v.Addr().Interface().(*Adapters).each(path, func(p string, s confkit.Section) {
				walkSecrets(reflect.ValueOf(s), p, out)
			})
			return
		}
		t := v.Type()
		for i := range t.NumField() {
			key, inline, ok := yamlKey(t.Field(i))
			if !ok {
				continue
			}
			p := path
			if !inline {
				p = joinKey(path, key)
			}
			if t.Field(i).Type != secretType {
				walkSecrets(v.Field(i), p, out)
				continue
			}
			ref := SecretRef{Path: p, Secret: v.Field(i).Addr().Interface().(*confkit.Secret)}
			if j := fileField(t, key); j >= 0 {
				ref.File = v.Field(j).String()
			}
			*out = append(*out, ref)
		}
	}
}

// yamlKey returns the YAML key of f as yaml.v3 reads it; ok is false for a
// field YAML does not see.
func yamlKey(f reflect.StructField) (key string, inline, ok bool) {
	if !f.IsExported() {
		return "", false, false
	}
	key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if key == "-" {
		return "", false, false
	}
	if key == "" {
		key = strings.ToLower(f.Name)
	}
	for o := range strings.SplitSeq(opts, ",") {
		if o == "inline" {
			inline = true
		}
	}
	return key, inline, true
}

// fileField returns the index of the string field of t holding the file
// form of the secret with key key, or -1.
func fileField(t reflect.Type, key string) int {
	for i := range t.NumField() {
		if k, _, ok := yamlKey(t.Field(i)); ok && k == key+"_file" && t.Field(i).Type.Kind() == reflect.String {
			return i
		}
	}
	return -1
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// secretKeySet holds the paths of every secret a config file can hold and
// of their *_file forms, "[]" standing for any index.
type secretKeySet map[string]bool

// has reports whether a config key holds a secret or names one (its
// *_file form): whether path, its indices aside, is the path of a secret
// in a config that had every list and section.
func (s secretKeySet) has(path string) bool { return s[anyIndex(path)] }

// secretKeys returns the keys of the secrets of a config with the
// sections of adapters, whatever lists and sections it has.
func secretKeys(adapters []Adapter) secretKeySet {
	c := newConfig(adapters)
	fillShape(reflect.ValueOf(c).Elem())
	c.Courier.Adapters.each("", func(_ string, s confkit.Section) { fillShape(reflect.ValueOf(s)) })
	out := secretKeySet{}
	for _, s := range c.Secrets() {
		out[anyIndex(s.Path)] = true
		out[anyIndex(s.Path)+"_file"] = true
	}
	return out
}

// fillShape gives every pointer of v a value and every list one item, so
// that Secrets of the result finds every secret field.
func fillShape(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillShape(v.Elem())
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		for i := range v.Len() {
			fillShape(v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fillShape(f)
			}
		}
	}
}

// anyIndex replaces the indices in path by "[]": accounts[2].imap.password
// becomes accounts[].imap.password.
func anyIndex(path string) string {
	if !strings.Contains(path, "[") {
		return path
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '[')
		if i < 0 {
			b.WriteString(path)
			return b.String()
		}
		j := strings.IndexByte(path[i:], ']')
		if j < 0 {
			b.WriteString(path)
			return b.String()
		}
		b.WriteString(path[:i])
		b.WriteString("[]")
		path = path[i+j+1:]
	}
}

// resolve reads the *_file secrets, then lets each section that is a
// confkit.Normalizer rewrite what it was given (email's flat keys).
func (c *Config) resolve(dir string, line func(string) int, secrets bool) schema.Errors {
	var errs schema.Errors
	if secrets {
		for _, s := range c.Secrets() {
			if err := readSecret(s, dir, line); err != nil {
				errs = append(errs, err)
			}
		}
	}
	k := confkit.NewChecker(line, secrets)
	c.Courier.Adapters.each("courier.adapters", func(p string, s confkit.Section) {
		if n, ok := s.(confkit.Normalizer); ok {
			n.Normalize(k.At(p))
		}
	})
	return append(errs, k.Errors()...)
}

// readSecret reads the file form of secret s, if it has one, into s.
func readSecret(s SecretRef, dir string, line func(string) int) *schema.FieldError {
	if s.File == "" {
		return nil
	}
	if *s.Secret != "" {
		return &schema.FieldError{Line: line(s.Path), Path: s.Path, Msg: "set either the secret or its _file, not both"}
	}
	file := s.File
	if !filepath.IsAbs(file) {
		file = filepath.Join(dir, file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return &schema.FieldError{Line: line(s.Path + "_file"), Path: s.Path + "_file", Msg: "cannot read the secret file: " + pathError(err)}
	}
	*s.Secret = confkit.Secret(strings.TrimRight(string(b), "\r\n"))
	return nil
}

func pathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

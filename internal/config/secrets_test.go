package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters/email"
	"github.com/monoco/courier/adapters/slack"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/confkit"
)

var (
	secretType   = reflect.TypeFor[confkit.Secret]()
	adaptersType = reflect.TypeFor[config.Adapters]()
)

// fillSecrets walks v, in c, on its own, by the yaml tags of its types: it
// gives every pointer a value and every list two items, and sets each
// Secret field to "secret:<path>" and its *_file sibling to "file:<path>".
// courier.adapters is entered through c's sections, each at its
// provider's name, in the table's order. It returns the paths of the
// secrets it set.
func fillSecrets(t *testing.T, c *config.Config, v reflect.Value, path string) []string {
	t.Helper()
	var paths []string
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		paths = fillSecrets(t, c, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			paths = append(paths, fillSecrets(t, c, v.Index(i), path+"["+string(rune('0'+i))+"]")...)
		}
	case reflect.Struct:
		if v.Type() == adaptersType {
			for _, a := range adapters {
				paths = append(paths, fillSecrets(t, c, reflect.ValueOf(c.Section(a.Name)).Elem(), path+"."+string(a.Name))...)
			}
			return paths
		}
		ty := v.Type()
		for i := range ty.NumField() {
			f := ty.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || key == "-" || key == "" {
				continue
			}
			p := key
			if path != "" {
				p = path + "." + key
			}
			if f.Type != secretType {
				paths = append(paths, fillSecrets(t, c, v.Field(i), p)...)
				continue
			}
			v.Field(i).SetString("secret:" + p)
			paths = append(paths, p)
			file, ok := fieldByKey(ty, key+"_file")
			if !ok || file.Type.Kind() != reflect.String {
				t.Errorf("%s (%s.%s) is a Secret without a string %s_file field beside it", p, ty.Name(), f.Name, key)
				continue
			}
			v.FieldByIndex(file.Index).SetString("file:" + p)
		}
	}
	return paths
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); k == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// Every Secret field of Config, wherever it is (in the providers'
// sections, in the accounts list, behind the imap and smtp pointers), is in
// Secrets, under the path errors use, with the field's own address and its
// *_file sibling's value.
func TestSecretsFindsEverySecretField(t *testing.T) {
	c := config.Default(adapters)
	want := fillSecrets(t, c, reflect.ValueOf(c).Elem(), "")
	for _, p := range []string{
		"courier.adapters.email.password",
		"courier.adapters.email.accounts[0].imap.password",
		"courier.adapters.email.accounts[1].smtp.password",
		"courier.adapters.lark.app_secret",
		"courier.adapters.slack.signing_secret",
	} {
		if !contains(want, p) {
			t.Fatalf("the test's own walk missed %s: %v", p, want)
		}
	}
	refs := c.Secrets()
	var got []string
	for _, r := range refs {
		got = append(got, r.Path)
		if r.Secret == nil || r.Secret.Reveal() != "secret:"+r.Path {
			t.Errorf("%s: Secret points at %v, not at the field of that path", r.Path, r.Secret)
		}
		if r.File != "file:"+r.Path {
			t.Errorf("%s: File = %q, want its _file sibling's value", r.Path, r.File)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Secrets() paths:\n got %q\nwant %q", got, want)
	}

	// Writing through a ref writes the config.
	for _, r := range refs {
		*r.Secret = "changed"
	}
	if a := email.ConfigOf(c).Accounts[1]; a.SMTP.Password.Reveal() != "changed" || slack.ConfigOf(c).BotToken.Reveal() != "changed" {
		t.Error("SecretRef.Secret is a copy, not the config's field")
	}

	// Sections that are absent hold no secrets.
	email.ConfigOf(c).Accounts = []email.AccountConfig{{Name: "a", SMTP: &email.SMTPConfig{}}}
	for _, r := range c.Secrets() {
		if strings.Contains(r.Path, "accounts[0].imap") || strings.Contains(r.Path, "accounts[1]") {
			t.Errorf("%s reported for a section the config does not have", r.Path)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Every secret is read from its *_file form, relative to the config's
// folder, and a secret set both ways is an error at the secret's key.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	var yml strings.Builder
	yml.WriteString(`courier:
  adapters:
    email:
      password_file: email.pw
      accounts:
        - name: work
          imap: {host: imap.example.com, username: a@example.com, password_file: imap.pw}
          smtp: {host: smtp.example.com, username: a@example.com, password_file: smtp.pw}
    lark:
      app_secret_file: lark-app.pw
      verification_token_file: lark-verify.pw
      encrypt_key_file: lark-encrypt.pw
    slack:
      bot_token_file: slack-bot.pw
      app_token_file: slack-app.pw
      signing_secret_file: slack-signing.pw
`)
	for _, f := range []string{"email.pw", "imap.pw", "smtp.pw", "lark-app.pw", "lark-verify.pw", "lark-encrypt.pw", "slack-bot.pw", "slack-app.pw", "slack-signing.pw"} {
		os.WriteFile(filepath.Join(dir, f), []byte("in "+f+"\n"), 0o600)
	}
	c, err := config.Parse([]byte(yml.String()), dir, adapters)
	if err != nil {
		t.Fatal(err)
	}
	refs := c.Secrets()
	if len(refs) != 9 {
		t.Errorf("%d secrets, want 9: %+v", len(refs), refs)
	}
	for _, r := range refs {
		if r.File == "" || r.Secret.Reveal() != "in "+r.File {
			t.Errorf("%s: %q from file %q", r.Path, r.Secret.Reveal(), r.File)
		}
	}

	_, err = config.Parse([]byte("courier:\n  adapters:\n    slack:\n      signing_secret: x\n      signing_secret_file: slack-signing.pw\n"), dir, adapters)
	if err == nil || !strings.Contains(err.Error(), "4: courier.adapters.slack.signing_secret: set either the secret or its _file") {
		t.Errorf("secret set twice: err = %v", err)
	}
}

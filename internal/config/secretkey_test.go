package config_test

import (
	"testing"

	"github.com/monoco/courier/internal/config"
)

// secretKey, which empties secrets for the commands that run without them,
// knows every secret Secrets finds and its *_file form, at any index, and
// nothing else: the providers' secrets too, through the provider table.
func TestSecretKey(t *testing.T) {
	c := config.Default(adapters)
	config.FillShape(c)
	refs := c.Secrets()
	if len(refs) < 9 {
		t.Fatalf("fillShape left sections out: %d secrets", len(refs))
	}
	secretKey := config.SecretKey(adapters)
	for _, r := range refs {
		for _, p := range []string{r.Path, r.Path + "_file"} {
			if !secretKey(p) {
				t.Errorf("secretKey(%q) = false", p)
			}
		}
	}
	for p, want := range map[string]bool{
		"courier.adapters.email.accounts[12].smtp.password_file": true,
		"courier.adapters.email.accounts[3].imap.password":       true,
		"courier.adapters.email.password":                        true,
		"courier.adapters.lark.encrypt_key":                      true,
		"courier.adapters.email.accounts[3].imap.username":       false,
		"courier.adapters.email.accounts[3].imap":                false,
		"courier.adapters.email.username":                        false,
		"courier.adapters.lark.app_id":                           false,
		"courier.root":                                           false,
		"password":                                               false,
	} {
		if secretKey(p) != want {
			t.Errorf("secretKey(%q) = %v, want %v", p, !want, want)
		}
	}
}

package confkit

import "testing"

// A secret of StrongSecretLen bytes or more goes wherever it appears; a
// shorter one only where it stands alone. With Lark's test verification
// token "v", every v of the log became [redacted] ("larkfake does not
// ser[redacted]e GET /open-apis/im/[redacted]1/chats").
func TestRedactShortSecrets(t *testing.T) {
	for _, tc := range []struct {
		in      string
		secrets []string
		want    string
	}{
		{"larkfake does not serve GET /open-apis/im/v1/chats", []string{"v"}, "larkfake does not serve GET /open-apis/im/v1/chats"},
		{`token "v" refused; v, again: v`, []string{"v"}, `token "[redacted]" refused; [redacted], again: [redacted]`},
		{"abcabc abc x_abc abc1 abc", []string{"abc"}, "abcabc [redacted] x_abc abc1 [redacted]"},
		{"aaa aa", []string{"aa"}, "aaa [redacted]"},
		{"née né", []string{"né"}, "née [redacted]"},
		{"token=hunter2-pass;hunter2-passX", []string{"hunter2-pass"}, "token=[redacted];[redacted]X"},
		{"nothing here", []string{"", "zz"}, "nothing here"},
	} {
		if got := Redact(tc.in, tc.secrets...); got != tc.want {
			t.Errorf("Redact(%q, %q) = %q, want %q", tc.in, tc.secrets, got, tc.want)
		}
	}
}

package mime

import (
	"slices"
	"testing"
)

// splitAddressList returns each item as written, slices of the list:
// separators inside quotes, comments and angle brackets kept, group names
// dropped, escapes passed over.
func TestSplitAddressList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a@b.c", []string{"a@b.c"}},
		{"Ann <a@b.c>, bob@d.e; carol@f.g", []string{"Ann <a@b.c>", " bob@d.e", " carol@f.g"}},
		{"team: a@b.c, d@e.f;", []string{" a@b.c", " d@e.f", ""}},
		{"\"Last, First\" <a@b.c>", []string{"\"Last, First\" <a@b.c>"}},
		{"(comment, with) a@b.c", []string{"(comment, with) a@b.c"}},
		{"x:y@z <a:b@c>", []string{"y@z <a:b@c>"}},
		{"\"unclosed, a@b.c", []string{"\"unclosed, a@b.c"}},
		{"(unclosed a@b.c", []string{"(unclosed a@b.c"}},
		{"<unclosed, a@b.c", []string{"<unclosed, a@b.c"}},
		{"a\\", []string{"a\\"}},
		{"\"a\\\"b\"@c.d", []string{"\"a\\\"b\"@c.d"}},
		{"a (x\\) y, z) b@c, \"q\\\\\" <d@e>", []string{"a (x\\) y, z) b@c", " \"q\\\\\" <d@e>"}},
	} {
		if got := splitAddressList(c.in); !slices.Equal(got, c.want) {
			t.Errorf("splitAddressList(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

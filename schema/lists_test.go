package schema

import (
	"strings"
	"testing"
)

// CapLists cuts each list of a front matter after max items, nested or
// not, leaves block scalars (whose lines may look like items) and the
// body alone, and returns a file without a long list as it is.
func TestCapLists(t *testing.T) {
	in := `---
a:
  cc:
    - id: 1
      name: one
    - id: 2
      name: two
    - id: 3
      name: three
  bcc: []
b:
  - x
  - y
  - z
  - w
c: |
  - not
  - an
  - item
d:
  - field: f
    ids:
      - 1
      - 2
      - 3
  - field: g
e: end
---
- body
- body
- body
`
	want := `---
a:
  cc:
    - id: 1
      name: one
    - id: 2
      name: two
    # [… 1 more items in the file, not read]
  bcc: []
b:
  - x
  - y
  # [… 2 more items in the file, not read]
c: |
  - not
  - an
  - item
d:
  - field: f
    ids:
      - 1
      - 2
      # [… 1 more items in the file, not read]
  - field: g
e: end
---
- body
- body
- body
`
	got, cut := CapLists([]byte(in), 2)
	if string(got) != want || cut != 3 {
		t.Fatalf("cut %d:\n%s", cut, got)
	}
	same, cut := CapLists([]byte(in), 4)
	if cut != 0 || string(same) != in {
		t.Fatalf("a file whose lists are short changed (cut %d):\n%s", cut, same)
	}
	if s, _ := CapLists([]byte("- a\n- b\n- c\n"), 1); !strings.HasPrefix(string(s), "- a\n- b") {
		t.Fatalf("a file without front matter changed: %q", s)
	}
}

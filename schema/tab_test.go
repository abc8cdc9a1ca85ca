package schema_test

import (
	"errors"
	"strings"
	"testing"

	. "github.com/monoco/courier/schema"
)

// A tab in a line's indentation is a YAML syntax error that yaml names
// only "found character that cannot start any token": the error says
// tabs, and which line (issue 19).
func TestTabIndentNamed(t *testing.T) {
	for _, c := range []struct {
		doc  string
		line int
	}{
		{"courier:\n\thttp: {listen: x}\n", 2},
		{"courier:\n  http:\n\t  listen: x\n", 3},
		{"courier:\n  log: {level: info}\n\tsocket: {}\n", 3},
	} {
		_, err := YAMLNode([]byte(c.doc))
		var errs Errors
		if err == nil || !errors.As(err, &errs) || errs[0].Line != c.line || !strings.Contains(err.Error(), "indented with a tab") {
			t.Errorf("%q: %v", c.doc, err)
		}
	}
	_, _, err := ParseDraft([]byte("---\nto: [a@b.c]\n\tsubject: x\n---\nbody\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3 is indented with a tab") {
		t.Errorf("front matter: %v", err)
	}
	// A tab elsewhere is no syntax error, and no hint is made up.
	if _, err := YAMLNode([]byte("a: 1\nb:\t2\n")); err != nil {
		t.Errorf("tab after a colon: %v", err)
	}
}

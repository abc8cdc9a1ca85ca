package webui

import (
	"strings"
	"testing"
)

func TestSanitiser(t *testing.T) {
	for _, tc := range []struct {
		name, md string
		bad      []string // none of these may be in the HTML
		want     string   // this must be
	}{
		{"script", "hi <script>window.pwned=1</script> there\n\n<script>alert(1)</script>", []string{"<script", "alert("}, "hi"},
		{"onerror", `<img src="x" onerror="window.pwned=1">` + "\n\ntext <b onmouseover=\"x()\">b</b>", []string{"onerror", "onmouseover", "<img"}, "text"},
		{"javascript link", "[click](javascript:window.pwned=1) and <a href=\"javascript:alert(1)\">raw</a>", []string{"javascript:", "alert("}, "click"},
		{"javascript entity", "[click](jav&#x61;script:alert(1))", []string{"javascript:", "alert(1)\""}, "click"},
		{"data url link", "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)", []string{"data:"}, "x"},
		{"data url image", "![pixel](data:image/png;base64,iVBORw0KGgo=)", []string{"<img", "data:"}, "image not loaded: pixel"},
		{"remote image", "![logo](https://tracker.example/p.gif)", []string{"<img"}, `href="https://tracker.example/p.gif"`},
		{"iframe and style", "<iframe src=\"https://x.example\"></iframe><style>body{display:none}</style>\n\nok", []string{"<iframe", "<style"}, "ok"},
		{"link kept", "[site](https://example.com/a?b=1)", nil, `rel="nofollow noreferrer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(renderBody(tc.md))
			for _, b := range tc.bad {
				if strings.Contains(strings.ToLower(got), strings.ToLower(b)) {
					t.Errorf("%q renders with %q:\n%s", tc.md, b, got)
				}
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("%q renders without %q:\n%s", tc.md, tc.want, got)
			}
		})
	}
}

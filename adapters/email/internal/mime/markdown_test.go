package mime

import "testing"

func TestMarkdownCIDs(t *testing.T) {
	paths := map[string]string{"a@b": ".monoco/dropzone/sha256/aa/x", "logo": ".monoco/dropzone/sha256/bb/y"}
	in := `<img src="cid:a@b"><img src='CID:a%40b'><img src="cid:Logo"><img src="cid:none"> text cid:a@b`
	got := rewriteCIDs(in, paths)
	want := `<img src=".monoco/dropzone/sha256/aa/x"><img src='.monoco/dropzone/sha256/aa/x'><img src=".monoco/dropzone/sha256/bb/y"><img src="cid:none"> text .monoco/dropzone/sha256/aa/x`
	if got != want {
		t.Errorf("rewriteCIDs:\n got %s\nwant %s", got, want)
	}
}

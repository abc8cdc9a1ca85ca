package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/internal/testutil/slackfake"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// hostFiles serves every file a corpus payload names (an object with an id
// and a url_private) from the fake, with content of its own, and returns
// the payload with the file's URLs pointing there: the files of corpus
// events live on files.slack.com, which tests cannot reach, and a message
// whose file cannot be fetched is (rightly) not acknowledged. contents
// receives each file's bytes by id.
func hostFiles(t *testing.T, fake *slackfake.Server, payload json.RawMessage, contents map[string][]byte) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return payload
	}
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			id, _ := x["id"].(string)
			if _, ok := x["url_private"].(string); ok && id != "" {
				var f slackapi.File
				b, _ := json.Marshal(x)
				json.Unmarshal(b, &f)
				content := []byte(fmt.Sprintf("the content of corpus file %s (%s)\n", id, f.Name))
				hosted := fake.AddFile(slackapi.File{ID: id, Name: f.Name, Title: f.Title, Mimetype: f.Mimetype, Filetype: f.Filetype, Size: len(content)}, content)
				x["url_private"], x["url_private_download"], x["size"] = hosted.URLPrivate, hosted.URLPrivateDownload, len(content)
				contents[id] = content
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkArtifacts fails unless the file of message id holds, byte for byte,
// the content hostFiles served for each of its artifacts, and left no
// file out.
// It returns how many artifacts it checked.
func checkArtifacts(t *testing.T, w *inWorld, name, id string, contents map[string][]byte) int {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(w.mb.Dir(mailbox.BoxInbound, schema.Slack), "*_"+id+".md"))
	if len(paths) != 1 {
		return 0 // hasFile said so
	}
	raw, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	m, err := schema.Decode(raw)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if strings.Contains(string(raw), "files_not_stored") {
		t.Errorf("%s: a file was not stored:\n%s", name, raw)
	}
	for _, a := range m.Artifacts {
		p, err := w.a.dz.Abs(a.ID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range contents {
			found = found || bytes.Equal(got, c)
		}
		if !found {
			t.Errorf("%s: artifact %s (%s) holds %q, no file the event named", name, a.Name, a.ID, got)
		}
	}
	return len(m.Artifacts)
}

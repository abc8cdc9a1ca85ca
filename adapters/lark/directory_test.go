package lark

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil/larkfake"
	"github.com/monoco/courier/schema"
)

// TestUserNameCached: a name is looked up once, a failed lookup falls back
// to the id and is not retried for every message.
func TestUserNameCached(t *testing.T) {
	s := fakeLark(t)
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	ctx := context.Background()
	for range 3 {
		if got := a.userName(ctx, "ou_ann"); got != "Ann Lee" {
			t.Fatalf("userName(ou_ann) = %q", got)
		}
	}
	for range 3 {
		if got := a.userName(ctx, "ou_stranger"); got != "" {
			t.Fatalf("userName of an unknown user = %q, want \"\"", got)
		}
	}
	if n := s.Calls(larkfake.RouteUser); n != 2 {
		t.Errorf("contact v3 called %d times for 3 lookups each of 2 users, want 2", n)
	}
	// Not an open_id: no call at all (the id came from an event).
	a.userName(ctx, "../../auth/v3/tenant_access_token/internal")
	if n := s.Calls(larkfake.RouteUser); n != 2 {
		t.Errorf("a malformed id was looked up")
	}
}

// TestUserNameCacheBounded: a cache full of fresh names does not grow.
func TestUserNameCacheBounded(t *testing.T) {
	s := fakeLark(t)
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	a.dir.names = map[string]nameEntry{}
	until := time.Now().Add(time.Hour)
	for i := range maxNames {
		a.dir.names[fmt.Sprintf("ou_filler%d", i)] = nameEntry{name: "x", until: until}
	}
	if got := a.userName(context.Background(), "ou_ann"); got != "Ann Lee" {
		t.Fatalf("userName = %q", got)
	}
	if n := len(a.dir.names); n > maxNames {
		t.Errorf("cache holds %d names, over its bound %d", n, maxNames)
	}
}

// TestMentionLookupsBounded: a post naming many strangers costs at most
// maxLookups calls, and is written with their ids.
func TestMentionLookupsBounded(t *testing.T) {
	s := fakeLark(t)
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	var ats []string
	for i := range 60 {
		ats = append(ats, fmt.Sprintf(`{"tag":"at","user_id":"ou_s%d"}`, i))
	}
	post, _ := json.Marshal(`{"title":"","content":[[` + strings.Join(ats, ",") + `]]}`)
	ev := readEvent(t, "testdata/post.json")
	ev.Event = json.RawMessage(strings.Replace(string(ev.Event), `"content":"{\"title\":\"Plan\"`, `"content":`+string(post)+`,"x":"{\"title\":\"Plan\"`, 1))
	out, err := a.normalize(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Message.Content.Text), "ou_s59") {
		t.Fatalf("the post was not the one built: %q", out.Message.Content.Text)
	}
	// One call for the sender, at most maxLookups for the mentions.
	if n := s.Calls(larkfake.RouteUser); n > maxLookups+1 || n >= 60 {
		t.Errorf("%d name lookups for one message naming 60 strangers, over %d", n, maxLookups+1)
	}
}

// TestSessionName: a group's session is named by its chat (looked up
// once); a p2p chat, which has no name, by the other person.
func TestSessionName(t *testing.T) {
	s := fakeLark(t)
	s.AddChat(larkfake.Chat{ChatID: "oc_dm", ChatMode: "p2p"})
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	ctx := context.Background()
	for _, name := range []string{"text_mention", "interactive"} {
		out, err := a.normalize(ctx, readEvent(t, "testdata/"+name+".json"))
		if err != nil || out.Message.Session.Name != "Launch" {
			t.Fatalf("%s: session name %q, %v; want the chat's, Launch", name, out.Message.Session.Name, err)
		}
	}
	if n := s.Calls(larkfake.RouteChat); n != 1 {
		t.Errorf("im/v1/chats called %d times for one chat, want 1", n)
	}
	ev := readEvent(t, "testdata/post.json")
	ev.Event = json.RawMessage(strings.Replace(string(ev.Event), `"oc_chat"`, `"oc_dm"`, 1))
	out, err := a.normalize(ctx, ev)
	if err != nil || out.Message.Session.Name != "Ann Lee" || out.Message.Session.ID != "oc_dm" {
		t.Errorf("p2p: session %+v, %v; want oc_dm named by Ann Lee", out.Message.Session, err)
	}
	// A recall names the chat only; the chat API says it is p2p.
	rc := readEvent(t, "testdata/recall.json")
	rc.Event = json.RawMessage(strings.Replace(string(rc.Event), `"oc_chat"`, `"oc_dm"`, 1))
	out, err = a.normalize(ctx, rc)
	if err != nil || out.Message.Session.Type != schema.Direct || out.Message.Session.ID != "oc_dm" {
		t.Errorf("recall in a p2p chat: session %+v, %v; want oc_dm, direct", out.Message.Session, err)
	}
}

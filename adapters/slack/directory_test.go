package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
)

// TestDirectoryCaches: a name is asked of Slack once, then served from
// the cache until it expires.
func TestDirectoryCaches(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	clock := &testutil.Clock{T: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a.dir.now = clock.Now
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		normalizeFixture(t, a, s, "channel")
	}
	if n := s.Calls("users.info"); n != 2 { // Ann (sender), Bob (mentioned)
		t.Errorf("users.info called %d times for 3 messages of 2 users, want 2", n)
	}
	if n := s.Calls("conversations.info"); n != 1 {
		t.Errorf("conversations.info called %d times, want 1", n)
	}
	// Ann renames herself: the old name stands until the entry expires.
	ann := slackapi.User{ID: "U0ANN0001", Name: "ann"}
	ann.Profile.DisplayName = "Annie"
	s.AddUser(ann)
	if got := a.userNameOr(ctx, "U0ANN0001", "", nil); got != "Ann" {
		t.Errorf("cached name %q, want Ann", got)
	}
	clock.Advance(dirOKTTL + time.Second)
	if got := a.userNameOr(ctx, "U0ANN0001", "", nil); got != "Annie" {
		t.Errorf("name after the TTL %q, want Annie", got)
	}
}

// TestDirectoryFailureFallsBack: a failed lookup leaves the id, never
// fails the message, is not asked again at once, and is retried later.
func TestDirectoryFailureFallsBack(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	clock := &testutil.Clock{T: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a.dir.now = clock.Now
	// Two users (Ann, Bob) and one channel are asked: each fails once.
	s.Fail("users.info", slackfake.Failure{Status: 500, Times: 2})
	s.Fail("conversations.info", slackfake.Failure{Error: "channel_not_found"})
	ev := normalizeFixture(t, a, s, "channel")
	if ev == nil {
		t.Fatal("nothing written")
	}
	m := ev.Message
	testutil.CheckMessage(t, "fallback", m)
	if m.Participants.From.Name != "U0ANN0001" || m.Session.Name != "C0GEN0001" {
		t.Errorf("from %+v, session %+v: want the ids standing for the names", m.Participants.From, m.Session)
	}
	if !strings.Contains(m.Body, "U0BOB0002") {
		t.Errorf("body %q: the mention's id is lost", m.Body)
	}
	calls := s.Calls("users.info")
	normalizeFixture(t, a, s, "channel")
	if s.Calls("users.info") != calls {
		t.Errorf("a failed lookup is asked again at once (%d calls, then %d)", calls, s.Calls("users.info"))
	}
	clock.Advance(dirFailTTL + time.Second)
	ev = normalizeFixture(t, a, s, "thread_reply") // Bob
	if ev.Message.Participants.From.Name != "Bob Stone" {
		t.Errorf("after the failure's TTL: from %+v, want Bob Stone", ev.Message.Participants.From)
	}
}

// TestDirectoryBounds: the cache holds at most its bound, and one message
// causes at most dirMaxLookups lookups, however many ids it names.
func TestDirectoryBounds(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	a.dir.max = 5
	var text strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&text, "<@U%09d> ", i)
	}
	inner, _ := json.Marshal(map[string]any{"type": "message", "channel": "C0GEN0001", "channel_type": "channel", "user": "U0ANN0001",
		"text": text.String(), "ts": "1700008000.000001"})
	before := s.Calls("users.info") + s.Calls("conversations.info")
	ev, err := a.normalize(context.Background(), event{ID: "EvB", Inner: inner})
	if err != nil || ev == nil {
		t.Fatal(ev, err)
	}
	testutil.CheckMessage(t, "many mentions", ev.Message)
	if n := s.Calls("users.info") + s.Calls("conversations.info") - before; n > dirMaxLookups {
		t.Errorf("%d lookups for one message, over the bound of %d", n, dirMaxLookups)
	}
	if n := a.dir.size(); n > 5 {
		t.Errorf("the cache holds %d entries, over its bound of 5", n)
	}
	if !strings.Contains(ev.Message.Body, "U000000299") {
		t.Errorf("a mention past the lookup bound lost its id")
	}
}

// TestDirectoryNotIDs: what is not a Slack id is never sent to the API.
func TestDirectoryNotIDs(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	for _, id := range []string{"", "redacted", "U0ANN0001&token=x", "../U0ANN0001", "u0ann0001"} {
		if _, ok := a.user(context.Background(), id, nil); ok {
			t.Errorf("user(%q) answered", id)
		}
	}
	if n := s.Calls("users.info"); n != 0 {
		t.Errorf("users.info called %d times for non-ids", n)
	}
}

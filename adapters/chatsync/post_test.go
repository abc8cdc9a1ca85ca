package chatsync_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/schema"
)

// gate records when the Sender entered its commit.
type gate struct{ log *[]string }

func (g gate) Enter(context.Context) error { *g.log = append(*g.log, "commit"); return nil }

// steps are a draft of two text parts and a file, recording what they do.
func steps(log *[]string, failAt string) []chatsync.Step {
	post := func(label, reply string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			if label == failAt {
				return "", adapters.Temporary(errors.New("test: post: HTTP 500"))
			}
			*log = append(*log, "post "+label)
			return reply, nil
		}
	}
	return []chatsync.Step{
		{Label: "text 1/2", Post: post("text 1/2", "1.1")},
		{Label: "text 2/2", Post: post("text 2/2", "1.2")},
		{Label: "files 1-1/1", Post: post("files 1-1/1", "F1"),
			Upload: func(context.Context) error { *log = append(*log, "upload"); return nil }},
	}
}

// Uploads first, then the commit, then the posts in order, each reached
// but the last; a later attempt skips what an earlier one posted, and a
// failure after a post is a PartialError with what was posted.
func TestPoster(t *testing.T) {
	ctx := context.Background()
	var log []string
	var reached []string
	at := &adapters.Attempt{Draft: &schema.Draft{ID: "d1"}, Gate: gate{&log},
		Progress: func(_ context.Context, r ...schema.RecipientResult) error {
			reached = append(reached, r[0].Address)
			return nil
		}}
	poster := chatsync.Poster{Name: "test"}
	_, err := poster.Post(ctx, at, "C1", steps(&log, "files 1-1/1"))
	var pe *adapters.PartialError
	if !errors.As(err, &pe) || len(pe.Accepted) != 2 || !adapters.IsTemporary(err) {
		t.Fatalf("a failure after two posts: %v", err)
	}
	if got := strings.Join(log, ", "); got != "upload, commit, post text 1/2, post text 2/2" {
		t.Errorf("order %q", got)
	}
	if fmt.Sprint(reached) != "[C1 text 1/2 C1 text 2/2]" {
		t.Errorf("reached %v", reached)
	}
	log, reached = nil, nil
	at.Accepted = pe.Accepted
	got, err := poster.Post(ctx, at, "C1", steps(&log, ""))
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(log, ", "); s != "upload, commit, post files 1-1/1" {
		t.Errorf("the next attempt did %q", s)
	}
	if len(reached) != 0 {
		t.Errorf("the last step was reached through Progress: %v", reached)
	}
	if fmt.Sprint(got.Replies) != "[1.1 1.2 F1]" || len(got.Results) != 1 || got.Results[0].Address != "C1 files 1-1/1" || got.Results[0].Status != "sent" {
		t.Errorf("posted %+v", got)
	}
	// A failure before any post is the step's own error.
	log = nil
	at.Accepted = nil
	if _, err := poster.Post(ctx, at, "C1", steps(&log, "text 1/2")); err == nil || errors.As(err, &pe) {
		t.Errorf("a failure of the first post: %v", err)
	}
}

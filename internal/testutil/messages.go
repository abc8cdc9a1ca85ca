package testutil

import (
	"fmt"
	"sync"
	"time"

	"github.com/monoco/courier/schema"
)

// Message returns a valid inbound message of provider with id
// "<provider>_<uid>", sent at at, saying text. Callers adjust fields after.
func Message(p schema.Provider, uid string, at time.Time, text string) *schema.Message {
	m := &schema.Message{
		ID:        fmt.Sprintf("%s_%s", p, uid),
		Provider:  p,
		Direction: schema.Inbound,
		Session:   schema.Session{ID: "chat-1", Type: schema.Group, Name: "Test chat"},
		Participants: schema.Participants{
			From: schema.Participant{ID: "u_ann", Name: "Ann"},
		},
		Timestamp:  schema.NewTime(at),
		ReceivedAt: schema.NewTime(at.Add(time.Second)),
		Type:       schema.TypeText,
		Content:    schema.Content{Text: schema.NullString(text)},
		Metadata:   schema.Metadata{SchemaVersion: schema.SchemaVersion, ProtocolVersion: schema.ProtocolVersion},
		Body:       text + "\n",
	}
	if p == schema.Email {
		m.Session = schema.Session{ID: "email-thread:" + uid + "@example.com", Type: schema.Thread, Name: "Subject " + uid,
			ThreadKey: schema.NullString("email-thread:" + uid + "@example.com")}
		m.Participants.From = schema.Participant{ID: "ann@example.com", Name: "Ann", Email: "ann@example.com"}
	}
	return m
}

// Time parses an RFC 3339 time or panics.
func Time(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Clock is a settable clock for tests, safe for concurrent use. Set T
// before sharing it.
type Clock struct {
	mu sync.Mutex
	T  time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.T
}

// Advance moves the clock on.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.T = c.T.Add(d)
}

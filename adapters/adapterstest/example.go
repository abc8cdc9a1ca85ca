// Package adapterstest holds the template provider: a whole provider in a
// screenful, with a Source, a Sender, a Webhook and a Resolver, for a chat
// service that lives in memory (Chat). It is what "Adding a provider" in
// the adapters package doc points to, and what the tests of the seam plug
// into the real service. It stands in for Discord, a provider the protocol
// names and Courier has no adapter for.
package adapterstest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

// Post is one message on the Chat: what the provider's API would send.
type Post struct {
	Channel, ID, User, Text string
	At                      time.Time
}

// Chat is the chat service: posts in order, a feed a Source follows.
type Chat struct {
	mu    sync.Mutex
	posts []Post
	more  chan struct{} // closed and replaced when a post is added
}

// NewChat returns an empty chat.
func NewChat() *Chat { return &Chat{more: make(chan struct{})} }

// Post adds a post and returns its id.
func (c *Chat) Post(channel, user, text string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := Post{Channel: channel, ID: strconv.Itoa(len(c.posts) + 1), User: user, Text: text, At: time.Now().UTC()}
	c.posts = append(c.posts, p)
	close(c.more)
	c.more = make(chan struct{})
	return p.ID
}

// Posts returns the posts from index from on, and a channel closed when
// there are more.
func (c *Chat) Posts(from int) ([]Post, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Post(nil), c.posts[min(from, len(c.posts)):]...), c.more
}

var channelRE = regexp.MustCompile(`^#[a-z0-9-]+$`)

// Options configure the provider.
type Options struct {
	Chat          *Chat
	Bot           string // the bot's user id: its posts are its own
	SigningSecret string // verifies webhook requests
}

// New returns the provider. It does no I/O.
func New(o Options) (*adapters.Provider, error) {
	if o.Chat == nil {
		return nil, fmt.Errorf("adapterstest: Options.Chat is required")
	}
	h := &adapters.HealthTracker{}
	return &adapters.Provider{
		Name:     schema.Discord,
		Resolver: adapters.ChatResolver{IDs: channelRE}, // recipients are channels, "#name"; a reply goes to its channel
		Sources:  []adapters.Source{&source{o: o, health: h}},
		Sender: adapters.SenderFunc(func(ctx context.Context, at *adapters.Attempt) (adapters.Receipt, error) {
			if err := at.EnterCommit(ctx); err != nil {
				return adapters.Receipt{}, adapters.Temporary(err)
			}
			ch := at.Draft.To[0]
			id := o.Chat.Post(ch, o.Bot, at.Draft.Text())
			return adapters.Receipt{ProviderMessageID: id, Channel: ch, InboundID: messageID(ch, id)}, nil
		}),
		Webhook: adapters.WebhookFunc(func(sink adapters.Sink) http.Handler { return webhook(o, sink) }),
		Health:  h,
		Self:    []string{o.Bot},
	}, nil
}

// source follows the chat's feed from its checkpoint (an index).
type source struct {
	o      Options
	health *adapters.HealthTracker
}

func (s *source) Name() string { return "discord" }

func (s *source) Run(ctx context.Context, sink adapters.Sink) error {
	v, _, err := sink.Checkpoint(ctx, "discord/feed")
	if err != nil {
		return err
	}
	next, _ := strconv.Atoi(v)
	s.health.Set(adapters.StatusConnected, "")
	for {
		posts, more := s.o.Chat.Posts(next)
		for _, p := range posts {
			next++
			ev := adapters.Event{Message: normalise(p), Self: p.User == s.o.Bot,
				Checkpoint: &adapters.Checkpoint{Key: "discord/feed", Value: strconv.Itoa(next)}}
			if err := sink.Deliver(ctx, ev); err != nil {
				return err
			}
			s.health.Event()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-more:
		}
	}
}

// webhook takes posts pushed over HTTP, signed with HMAC-SHA256 of the body
// in X-Signature; anything unsigned is refused and nothing is written.
func webhook(o Options, sink adapters.Sink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !hmac.Equal([]byte(r.Header.Get("X-Signature")), []byte(Sign(o.SigningSecret, body))) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p Post
		if err := json.Unmarshal(body, &p); err != nil || p.Channel == "" || p.ID == "" {
			http.Error(w, "want a post with channel and id", http.StatusBadRequest)
			return
		}
		if err := sink.Deliver(r.Context(), adapters.Event{Message: normalise(p), Self: p.User == o.Bot}); err != nil {
			http.Error(w, "not stored", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// Sign returns the X-Signature of body, as the chat service would send it.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

func messageID(channel, id string) string { return "discord_" + channel[1:] + "_" + id }

func normalise(p Post) *schema.Message {
	at := p.At
	if at.IsZero() {
		at = time.Now().UTC()
	}
	return &schema.Message{
		ID: messageID(p.Channel, p.ID), Provider: schema.Discord, Direction: schema.Inbound,
		Session:      schema.Session{ID: p.Channel, Type: schema.Group, Name: p.Channel},
		Participants: schema.Participants{From: schema.Participant{ID: p.User, Name: p.User}},
		Timestamp:    schema.NewTime(at), ReceivedAt: schema.NewTime(time.Now()),
		Type: schema.TypeText, Content: schema.Content{Text: schema.NullString(p.Text)},
		Metadata: schema.Metadata{SchemaVersion: schema.SchemaVersion, ProtocolVersion: schema.ProtocolVersion},
		Body:     p.Text + "\n",
	}
}

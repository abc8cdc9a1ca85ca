package slack

import (
	"context"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"
)

// The directory names the users and conversations a message mentions or
// comes from (users.info, conversations.info), so that a file says "Ann
// Lee in #general" and not "U024BE7LH in C024BE91L". Names are a nicety:
// a lookup that fails leaves the id and never fails the message, and is
// tried again after a short while (failTTL) rather than on every message,
// so that a Slack outage does not double the calls each event makes.
//
// The cache is bounded (maxEntries; the oldest entry goes first) because
// anyone in a workspace can mention ids by the thousand, and entries expire
// (okTTL) because people rename themselves and channels.

const (
	dirMaxEntries = 10000
	dirOKTTL      = time.Hour
	dirFailTTL    = time.Minute
	// dirMaxLookups bounds the lookups one message may cause: a message
	// that mentions a thousand users must not make a thousand calls
	// before it is written. The rest keep their ids.
	dirMaxLookups = 32
)

// user is what the directory knows of a user.
type user struct {
	Name  string // display name, else real name, else the handle; "" unknown
	IsBot bool
}

// conversation is what the directory knows of a conversation.
type conversation struct {
	Name   string // the channel's name; for a DM the other user's id in User
	IsIM   bool
	IsMPIM bool
	User   string // the other user of a DM
	Known  bool   // conversations.info answered
}

type dirEntry struct {
	user    user
	conv    conversation
	expires time.Time
	ok      bool // a successful lookup (else a failure remembered briefly)
}

// directory caches users.info and conversations.info. Its zero value is
// ready to use (the Adapter embeds one); now is time.Now unless a test
// sets it.
type directory struct {
	mu      sync.Mutex
	entries map[string]*dirEntry // "u:" + user id, "c:" + conversation id
	order   []string             // insertion order, for eviction
	now     func() time.Time
	max     int // 0: dirMaxEntries
}

func (d *directory) clock() time.Time {
	if d.now != nil {
		return d.now()
	}
	return time.Now()
}

// get returns the entry under key if it has not expired.
func (d *directory) get(key string) (*dirEntry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.entries[key]
	if !ok || !d.clock().Before(e.expires) {
		return nil, false
	}
	return e, true
}

// put stores e under key, evicting the oldest entries beyond the bound.
func (d *directory) put(key string, e *dirEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.entries == nil {
		d.entries = map[string]*dirEntry{}
	}
	if _, ok := d.entries[key]; !ok {
		d.order = append(d.order, key)
	}
	d.entries[key] = e
	limit := d.max
	if limit <= 0 {
		limit = dirMaxEntries
	}
	for len(d.entries) > limit && len(d.order) > 0 {
		delete(d.entries, d.order[0])
		d.order = d.order[1:]
	}
	// order only grows by new keys and shrinks by evictions, so it is
	// never longer than the bound plus one; compact its backing array
	// now and then so that evicted keys do not pin memory.
	if cap(d.order) > 2*limit+16 {
		d.order = append([]string(nil), d.order...)
	}
}

// size is the number of entries held (for tests).
func (d *directory) size() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.entries)
}

func (d *directory) expiry(ok bool) time.Time {
	if ok {
		return d.clock().Add(dirOKTTL)
	}
	return d.clock().Add(dirFailTTL)
}

// lookups counts what one message may still look up (dirMaxLookups).
type lookups struct{ left int }

func newLookups() *lookups { return &lookups{left: dirMaxLookups} }

func (l *lookups) take() bool {
	if l == nil {
		return true
	}
	if l.left <= 0 {
		return false
	}
	l.left--
	return true
}

// user returns what users.info says of id, from the cache when it can.
// ok is false when the name is unknown (the lookup failed, or the bound
// of this message's lookups was reached); the caller then shows the id.
func (a *Adapter) user(ctx context.Context, id string, l *lookups) (user, bool) {
	if !ids.MatchString(id) {
		return user{}, false // not a Slack id: never sent to the API
	}
	key := "u:" + id
	if e, ok := a.dir.get(key); ok {
		return e.user, e.ok
	}
	if !l.take() {
		return user{}, false
	}
	u, err := a.api.GetUserInfoContext(ctx, id)
	if err != nil {
		if ctx.Err() == nil {
			a.dir.put(key, &dirEntry{expires: a.dir.expiry(false)})
		}
		a.log.Debug("slack: users.info failed; the id stands for the name", "user", id, "error", err)
		return user{}, false
	}
	v := user{Name: userName(u), IsBot: u.IsBot}
	a.dir.put(key, &dirEntry{user: v, ok: true, expires: a.dir.expiry(true)})
	return v, true
}

// userName is the name Slack shows: the display name, else the real name,
// else the handle.
func userName(u *slackapi.User) string {
	for _, s := range []string{u.Profile.DisplayName, u.Profile.DisplayNameNormalized, u.Profile.RealName, u.RealName, u.Name} {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

// conversation returns what conversations.info says of id, cached like
// users.
func (a *Adapter) conversation(ctx context.Context, id string, l *lookups) (conversation, bool) {
	if !ids.MatchString(id) {
		return conversation{}, false
	}
	key := "c:" + id
	if e, ok := a.dir.get(key); ok {
		return e.conv, e.ok
	}
	if !l.take() {
		return conversation{}, false
	}
	c, err := a.api.GetConversationInfoContext(ctx, &slackapi.GetConversationInfoInput{ChannelID: id})
	if err != nil {
		if ctx.Err() == nil {
			a.dir.put(key, &dirEntry{expires: a.dir.expiry(false)})
		}
		a.log.Debug("slack: conversations.info failed; the id stands for the name", "channel", id, "error", err)
		return conversation{}, false
	}
	v := conversation{Name: strings.TrimSpace(c.Name), IsIM: c.IsIM, IsMPIM: c.IsMpIM, User: c.User, Known: true}
	a.dir.put(key, &dirEntry{conv: v, ok: true, expires: a.dir.expiry(true)})
	return v, true
}

// userNameOr returns the user's name, or fallback when it is unknown.
func (a *Adapter) userNameOr(ctx context.Context, id, fallback string, l *lookups) string {
	if u, ok := a.user(ctx, id, l); ok && u.Name != "" {
		return u.Name
	}
	return fallback
}

// sessionName names a conversation: a channel by its name, a DM by the
// other user's name; the id when neither is known.
func (a *Adapter) sessionName(ctx context.Context, id string, c conversation, l *lookups) string {
	switch {
	case c.IsIM && c.User != "":
		return a.userNameOr(ctx, c.User, c.User, l)
	case c.Name != "":
		return c.Name
	}
	return id
}

package lark

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/monoco/courier/schema"
)

// The names of senders (contact/v3/users) and of chats (im/v1/chats) are
// cached: one lookup per id per nameTTL, not per message. The cache is
// bounded (maxNames): the ids come from events, and anyone in a chat can
// make new ones appear. A failed lookup falls back to the id and is cached
// for a shorter while, so that a missing scope does not cost a call per
// message.
const (
	maxNames    = 4096
	nameTTL     = time.Hour
	nameFailTTL = 5 * time.Minute
)

type nameEntry struct {
	name  string
	mode  string // a chat's chat_mode (p2p, group, topic)
	until time.Time
}

type directory struct {
	mu    sync.Mutex
	names map[string]nameEntry // "u:" + open_id, "c:" + chat_id
}

// userName returns the display name of an open_id, or "" when Lark does
// not say.
func (a *Adapter) userName(ctx context.Context, openID string) string {
	if !strings.HasPrefix(openID, "ou_") || len(openID) > 128 {
		return ""
	}
	e := a.cachedName(ctx, "u:"+openID, func() (nameEntry, bool) {
		var r struct {
			User struct {
				Name string `json:"name"`
			} `json:"user"`
		}
		ok := a.getJSON(ctx, "/open-apis/contact/v3/users/"+url.PathEscape(openID)+"?user_id_type=open_id", &r)
		return nameEntry{name: r.User.Name}, ok
	})
	return e.name
}

// chat returns the name of a chat ("" when Lark does not say: a p2p chat
// has none) and its chat_mode ("p2p", "group", "topic"; "" unknown).
func (a *Adapter) chat(ctx context.Context, chatID string) (name, mode string) {
	if !strings.HasPrefix(chatID, "oc_") || len(chatID) > 128 {
		return "", ""
	}
	e := a.cachedName(ctx, "c:"+chatID, func() (nameEntry, bool) {
		var r struct {
			Name     string `json:"name"`
			ChatMode string `json:"chat_mode"`
		}
		ok := a.getJSON(ctx, "/open-apis/im/v1/chats/"+url.PathEscape(chatID), &r)
		return nameEntry{name: r.Name, mode: clip(r.ChatMode, 32)}, ok
	})
	return e.name, e.mode
}

func (a *Adapter) cachedName(ctx context.Context, key string, lookup func() (nameEntry, bool)) nameEntry {
	now := time.Now()
	a.dir.mu.Lock()
	if e, ok := a.dir.names[key]; ok && now.Before(e.until) {
		a.dir.mu.Unlock()
		return e
	}
	a.dir.mu.Unlock()
	e, ok := lookup()
	e.name = clip(strings.TrimSpace(schema.CleanText(e.name)), 256)
	ttl := nameTTL
	if !ok {
		ttl = nameFailTTL
	}
	a.dir.mu.Lock()
	defer a.dir.mu.Unlock()
	if a.dir.names == nil {
		a.dir.names = map[string]nameEntry{}
	}
	if len(a.dir.names) >= maxNames {
		for k, e := range a.dir.names {
			if !now.Before(e.until) {
				delete(a.dir.names, k)
			}
		}
		if len(a.dir.names) >= maxNames {
			clear(a.dir.names) // all fresh: start over rather than grow
		}
	}
	e.until = now.Add(ttl)
	a.dir.names[key] = e
	return e
}

// getJSON GETs a Lark API path and decodes its data into out. It reports
// whether Lark answered code 0; a failure is logged at debug (a name is
// not worth more).
func (a *Adapter) getJSON(ctx context.Context, path string, out any) bool {
	if err := a.apiGet(ctx, path, out); err != nil {
		a.log.Debug("lark: name not looked up", "path", path, "error", err)
		return false
	}
	return true
}

package lark

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The names of senders come from contact/v3/users, cached: one lookup per
// user per nameTTL, not per message. The cache is bounded (maxNames): the
// ids come from events, and anyone in a chat can make new ones appear. A
// failed lookup falls back to the id and is cached for a shorter while, so
// that a missing scope does not cost a call per message.
const (
	maxNames    = 4096
	nameTTL     = time.Hour
	nameFailTTL = 5 * time.Minute
)

type nameEntry struct {
	name  string
	until time.Time
}

type directory struct {
	mu    sync.Mutex
	names map[string]nameEntry
}

// userName returns the display name of an open_id, or "" when Lark does
// not say.
func (a *Adapter) userName(ctx context.Context, openID string) string {
	if !strings.HasPrefix(openID, "ou_") || len(openID) > 128 {
		return ""
	}
	now := time.Now()
	a.dir.mu.Lock()
	if e, ok := a.dir.names[openID]; ok && now.Before(e.until) {
		a.dir.mu.Unlock()
		return e.name
	}
	a.dir.mu.Unlock()
	name, ok := a.lookupUser(ctx, openID)
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
	a.dir.names[openID] = nameEntry{name: name, until: now.Add(ttl)}
	return name
}

// lookupUser calls contact/v3/users/{open_id}, fetching the token again
// once when Lark refuses it.
func (a *Adapter) lookupUser(ctx context.Context, openID string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for attempt := 0; attempt < 2; attempt++ {
		tok, err := a.tenantToken(ctx, attempt > 0)
		if err != nil {
			a.log.Debug("lark: user name not looked up", "open_id", openID, "error", err)
			return "", false
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/open-apis/contact/v3/users/"+url.PathEscape(openID)+"?user_id_type=open_id", nil)
		if err != nil {
			return "", false
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := a.apiClient().Do(req)
		if err != nil {
			a.log.Debug("lark: user name not looked up", "open_id", openID, "error", err)
			return "", false
		}
		var r struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
			Data struct {
				User struct {
					Name string `json:"name"`
				} `json:"user"`
			} `json:"data"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 256<<10)).Decode(&r)
		resp.Body.Close()
		switch {
		case err != nil:
			return "", false
		case r.Code == codeMissingToken || r.Code == codeInvalidToken:
			continue
		case r.Code != 0:
			a.log.Debug("lark: user name not looked up", "open_id", openID, "code", r.Code, "msg", clip(a.redact(r.Msg), 200))
			return "", false
		}
		return clip(strings.TrimSpace(r.Data.User.Name), 256), true
	}
	return "", false
}

package mailbox

import (
	"context"
	"database/sql"
	"strings"
)

// Newest is how the web viewer pages through the mailbox: newest first,
// by keyset (the clustered key (ts, id) of the last row shown), never by
// OFFSET, so that page 2,000 of 100,000 messages costs what page 1 does.

// Key is a position in the index: the timestamp (Unix nanoseconds) and id
// of an entry.
type Key struct {
	TS int64
	ID string
}

// KeyOf is the position of e.
func KeyOf(e *Entry) Key { return Key{TS: nanos(e.Timestamp), ID: e.ID} }

// Browse selects a page of Newest.
type Browse struct {
	// Filter selects as for List (its Limit and Thread are ignored).
	Filter Filter
	// Agent keeps the messages an agent claimed (now or before).
	Agent string
	// Search keeps the messages whose subject or text match these words
	// (MatchQuery), among those the search index holds.
	Search string
	// After is the last entry of the previous page; nil for the first.
	After *Key
	Limit int
}

// Newest calls fn for up to b.Limit entries, newest first, and returns
// the key to pass as After for the next page (nil: this was the last).
func (mb *Mailbox) Newest(ctx context.Context, b Browse, fn func(*Entry) error) (*Key, error) {
	f := b.Filter
	f.Limit, f.Thread = 0, ""
	q, args := mb.where(ctx, f)
	q = strings.TrimSuffix(q, " ORDER BY m.ts, m.id")
	var more []string
	if b.Agent != "" {
		more = append(more, "m.id IN (SELECT id FROM claims WHERE agent = :agent)")
		args = append(args, sql.Named("agent", b.Agent))
	}
	if m := MatchQuery(b.Search); m != "" {
		if _, err := mb.db.ExecContext(ctx, searchDDL); err != nil {
			return nil, dbError(err)
		}
		clause, err := mb.matchClause(ctx, m)
		if err != nil {
			return nil, err
		}
		more = append(more, clause)
		args = append(args, sql.Named("match", m))
	}
	if b.After != nil {
		more = append(more, "(m.ts < :ats OR (m.ts = :ats AND m.id < :aid))")
		args = append(args, sql.Named("ats", b.After.TS), sql.Named("aid", b.After.ID))
	}
	if len(more) > 0 {
		// where ends with its WHERE clause, or has none (a Both filter).
		if strings.Contains(q, " WHERE ") {
			q += " AND " + strings.Join(more, " AND ")
		} else {
			q += " WHERE " + strings.Join(more, " AND ")
		}
	}
	limit := max(b.Limit, 1)
	q += " ORDER BY m.ts DESC, m.id DESC LIMIT :limit"
	args = append(args, sql.Named("limit", limit+1))
	n := 0
	var last, next *Key
	err := mb.query(ctx, q, args, func(e *Entry) error {
		n++
		if n > limit {
			next = last
			return nil
		}
		k := KeyOf(e)
		last = &k
		return fn(e)
	})
	return next, err
}

// fewMatches is where matchClause changes its plan.
const fewMatches = 2000

// matchClause keeps the messages that match a search, the way that is
// fast for it. Few matches: their set, each looked up and sorted by time
// (a sort of at most fewMatches rows). Many: the messages in time order,
// each probed in the index, which finds a page's worth within a few
// hundred rows when many match (taking the set would sort all 100,000
// messages that say "the").
func (mb *Mailbox) matchClause(ctx context.Context, match string) (string, error) {
	var n int
	err := mb.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM search_text WHERE search_text MATCH ? LIMIT ?)`, match, fewMatches).Scan(&n)
	if err != nil {
		return "", dbError(err)
	}
	if n < fewMatches {
		return "m.id IN (SELECT d.id FROM search_text s JOIN search_docs d ON d.n = s.rowid WHERE search_text MATCH :match)", nil
	}
	return "EXISTS (SELECT 1 FROM search_docs d JOIN search_text s ON s.rowid = d.n WHERE d.id = m.id AND search_text MATCH :match)", nil
}

package mailbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode"
)

// The search index of the web viewer (internal/webui): the subject and
// text of every inbound message in an FTS5 table of the state database.
// It is derived from the files and filled lazily, by the service, a batch
// at a time (IndexSearch), so that ingest pays nothing for it; a full
// reindex drops it (dropRows) and the service fills it again. Until it
// has caught up, a search finds only the messages indexed so far
// (SearchBacklog says how many are not).

const searchDDL = `
CREATE TABLE IF NOT EXISTS search_docs (n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE IF NOT EXISTS search_text USING fts5(subject, body, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
`

// dropSearch is what a full reindex runs: the index is rebuilt from the
// files afterwards.
const dropSearch = `DROP TABLE IF EXISTS search_docs; DROP TABLE IF EXISTS search_text;`

// SearchText is what the search index holds of a message.
type SearchText struct{ Subject, Body string }

// IndexSearch adds to the search index up to limit inbound messages it
// lacks: of ids, or with ids nil the newest it lacks before after (nil:
// from the newest), for catching up; the key it returns is where such a
// scan goes on (nil: it is done). It reads each one's text with text (an
// error there indexes what its entry knows). It returns how many it
// added.
func (mb *Mailbox) IndexSearch(ctx context.Context, ids []string, after *Key, limit int, text func(*Entry) (SearchText, error)) (int, *Key, error) {
	if _, err := mb.db.ExecContext(ctx, searchDDL); err != nil {
		return 0, nil, dbError(err)
	}
	q := selectEntries + ` WHERE m.direction = 'inbound' AND NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.id = m.id)`
	args := []any{sql.Named("now", mb.now().UnixNano()), sql.Named("limit", limit)}
	switch {
	case ids != nil:
		if len(ids) == 0 {
			return 0, nil, nil
		}
		q += ` AND m.id IN (SELECT value FROM json_each(:ids))`
		b, _ := json.Marshal(ids)
		args = append(args, sql.Named("ids", string(b)))
	case after != nil:
		q += ` AND (m.ts < :ats OR (m.ts = :ats AND m.id < :aid))`
		args = append(args, sql.Named("ats", after.TS), sql.Named("aid", after.ID))
	}
	var todo []*Entry
	err := mb.query(ctx, q+` ORDER BY m.ts DESC, m.id DESC LIMIT :limit`, args, func(e *Entry) error { todo = append(todo, e); return nil })
	if err != nil || len(todo) == 0 {
		return 0, nil, err
	}
	var next *Key
	if len(todo) == limit {
		k := KeyOf(todo[len(todo)-1])
		next = &k
	}
	texts := make([]SearchText, len(todo))
	for i, e := range todo {
		t, err := text(e)
		if err != nil {
			t = SearchText{Subject: e.Session.Name, Body: e.Preview}
		}
		texts[i] = t
	}
	err = withTx(ctx, mb.db, func(tx *sql.Tx) error {
		for i, e := range todo {
			res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO search_docs (id) VALUES (?)`, e.ID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			n, _ := res.LastInsertId()
			if _, err := tx.ExecContext(ctx, `INSERT INTO search_text (rowid, subject, body) VALUES (?, ?, ?)`, n, texts[i].Subject, texts[i].Body); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("mailbox: search index: %w", err)
	}
	return len(todo), next, nil
}

// SearchBacklog returns how many inbound messages the search index lacks
// (all of them before IndexSearch first ran).
func (mb *Mailbox) SearchBacklog(ctx context.Context) (int, error) {
	var n int
	err := mb.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM messages WHERE direction = 'inbound') - (SELECT COUNT(*) FROM search_docs)`).Scan(&n)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		err = mb.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE direction = 'inbound'`).Scan(&n)
	}
	return max(n, 0), dbError(err)
}

// MatchQuery is words as an FTS5 query: each word a quoted phrase, all of
// them required, a trailing * kept as a prefix search. Nothing the user
// types is FTS5 syntax, so no input is a syntax error.
func MatchQuery(words string) string {
	var parts []string
	for _, w := range strings.FieldsFunc(words, func(r rune) bool { return unicode.IsSpace(r) || r == '"' }) {
		prefix := strings.HasSuffix(w, "*")
		w = strings.TrimRight(w, "*")
		if w == "" {
			continue
		}
		p := `"` + w + `"`
		if prefix {
			p += "*"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// OpenPath opens a file of the mailbox by its path relative to the
// workspace (an Entry's Path), confined as OpenFile is: what the indexer
// reads with the entry in hand, without looking it up again.
func (mb *Mailbox) OpenPath(rel string) (*os.File, error) { return mb.fs.openFile(mb.Abs(rel)) }

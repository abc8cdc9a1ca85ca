package notify

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// State is what `courier status`, /health and /metrics say of a hook: its
// durable queue and dead letters, from the state database (so the same
// with the service stopped).
type State struct {
	// Backlog is the calls queued and not yet run, those waiting to be
	// tried again included.
	Backlog int `json:"backlog"`
	// Failing is the queued calls that failed at least once and wait to
	// be tried again.
	Failing int `json:"failing"`
	// RetryAt is when the first of them is tried again.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Dead is the calls set aside in its dead letters (notify_dead):
	// `courier hooks retry` runs them again.
	Dead int `json:"dead"`
	// LastError is the newest error: a failing call's, else the newest
	// dead letter's.
	LastError string `json:"last_error,omitempty"`
}

// States returns the state of each hook named (zero for one that never
// ran) and of any other hook the tables still hold calls of (a hook since
// removed from the config, with dead letters left).
func States(ctx context.Context, db *sql.DB, hooks []string) (map[string]State, error) {
	out := make(map[string]State, len(hooks))
	for _, h := range hooks {
		out[h] = State{}
	}
	err := eachRow(ctx, db, `SELECT hook, COUNT(*), SUM(attempts > 0), MIN(CASE WHEN attempts > 0 THEN next_at END),
		COALESCE((SELECT last_error FROM notify_queue q2 WHERE q2.hook = q.hook AND q2.attempts > 0 ORDER BY q2.next_at DESC LIMIT 1), '')
		FROM notify_queue q GROUP BY hook`, func(rows *sql.Rows) error {
		var h, last string
		var st State
		var retry sql.NullInt64
		if err := rows.Scan(&h, &st.Backlog, &st.Failing, &retry, &last); err != nil {
			return err
		}
		if retry.Valid {
			t := time.Unix(0, retry.Int64).UTC()
			st.RetryAt = &t
		}
		st.LastError = last
		out[h] = st
		return nil
	})
	if err != nil {
		return out, err
	}
	err = eachRow(ctx, db, `SELECT hook, COUNT(*), COALESCE((SELECT last_error FROM notify_dead d2 WHERE d2.hook = d.hook ORDER BY d2.dead_at DESC LIMIT 1), '')
		FROM notify_dead d GROUP BY hook`, func(rows *sql.Rows) error {
		var h, last string
		var n int
		if err := rows.Scan(&h, &n, &last); err != nil {
			return err
		}
		st := out[h]
		st.Dead = n
		if st.LastError == "" {
			st.LastError = last
		}
		out[h] = st
		return nil
	})
	return out, err
}

// eachRow runs q and fn for each row; a database where the hooks never
// ran (no tables) has no rows.
func eachRow(ctx context.Context, db *sql.DB, q string, fn func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil
		}
		return fmt.Errorf("notify: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	return rows.Err()
}

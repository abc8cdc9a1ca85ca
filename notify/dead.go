package notify

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/monoco/courier/mailbox"
)

// DeadCounts returns how many calls each hook has set aside in its dead
// letters (none when the service never ran hooks).
func DeadCounts(ctx context.Context, db *sql.DB) (map[string]int, error) {
	out := map[string]int{}
	err := eachRow(ctx, db, `SELECT hook, COUNT(*) FROM notify_dead GROUP BY hook`, func(rows *sql.Rows) error {
		var h string
		var n int
		err := rows.Scan(&h, &n)
		out[h] = n
		return err
	})
	return out, err
}

// Retry moves the dead letters of hooks (every hook's when none is
// named) back to their queues, as new calls; a running service takes
// them at its next poll. It returns how many moved.
func Retry(ctx context.Context, db *sql.DB, hooks []string) (int, error) {
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return 0, fmt.Errorf("notify: state database: %w", err)
	}
	where, args := "", []any{}
	if len(hooks) > 0 {
		where = ` WHERE hook IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(hooks)), ", ") + `)`
		for _, h := range hooks {
			args = append(args, h)
		}
	}
	var n int64
	err := withTx(ctx, db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO notify_queue (hook, seq, kind, id, lane, attempts, next_at, last_error, queued_at)
			SELECT hook, seq, kind, id, lane, 0, 0, '', queued_at FROM notify_dead`+where, args...)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		_, err = tx.ExecContext(ctx, `DELETE FROM notify_dead`+where, args...)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("notify: %w", err)
	}
	return int(n), nil
}

// adopt takes into each hook's queue in memory the rows of notify_queue
// it does not hold: calls `courier hooks retry` put back. It runs at each
// poll; the loop is the queue's only other writer, so a hook whose count
// matches holds them all.
func (r *Runner) adopt(ctx context.Context) {
	db := r.mb.DB()
	for _, h := range r.hooks {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM notify_queue WHERE hook = ?`, h.Name).Scan(&n); err != nil || n <= len(h.items) {
			continue
		}
		held := map[int64]bool{}
		for _, it := range h.items {
			held[it.seq] = true
		}
		rows, err := db.QueryContext(ctx, `SELECT seq, kind, id, lane, queued_at FROM notify_queue WHERE hook = ? ORDER BY seq`, h.Name)
		if err != nil {
			continue
		}
		added := 0
		for rows.Next() {
			it := &item{}
			var k string
			var queued int64
			if rows.Scan(&it.seq, &k, &it.id, &it.lane, &queued) != nil || held[it.seq] {
				continue
			}
			it.kind, it.queuedAt = mailbox.EventKind(k), time.Unix(0, queued)
			h.items = append(h.items, it)
			added++
		}
		rows.Close()
		slices.SortFunc(h.items, func(a, b *item) int { return cmp.Compare(a.seq, b.seq) })
		if added > 0 {
			r.log.Info("notify: calls put back from the hook's dead letters", "hook", h.Name, "events", added)
		}
	}
}

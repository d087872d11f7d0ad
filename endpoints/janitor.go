package endpoints

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// JanitorEveryDefault is the janitor's period when RunJanitor is given none.
const JanitorEveryDefault = 10 * time.Second

// failingSQL finds the enabled endpoints whose run of failed attempts began
// more than $1 microseconds ago by the database clock.
const failingSQL = `SELECT id::text FROM webhook_endpoints
WHERE enabled AND failing_since < now() - $1::bigint * interval '1 microsecond' ORDER BY name`

// lockFailingSQL locks one of them and checks again, under the lock, that it
// is still enabled and failing: a success recorded meanwhile (failing_since
// cleared), an operator or another worker's janitor wins.
const lockFailingSQL = `SELECT name, webhook_time_clamp(failing_since) FROM webhook_endpoints
WHERE id = $1 AND enabled AND failing_since < now() - $2::bigint * interval '1 microsecond' FOR UPDATE`

// RunJanitor, every every (JanitorEveryDefault when 0), disables the
// endpoints whose every attempt has failed for after (0: never) and erases
// the previous secrets whose grace period has ended; the first pass runs at
// once. It returns nil when ctx ends; a failed pass is logged and the next
// one runs.
func (s *Store) RunJanitor(ctx context.Context, every, after time.Duration) error {
	if after < 0 || every < 0 {
		return errors.New("endpoints: janitor: every and after must not be negative")
	}
	if every == 0 {
		every = JanitorEveryDefault
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if after > 0 {
			if _, err := s.DisableFailing(ctx, after); err != nil && ctx.Err() == nil {
				s.log.Warn("endpoints: janitor pass failed", "error", err)
			}
		}
		if _, err := s.ForgetExpiredSecrets(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("endpoints: janitor pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// DisableFailing is one pass of the janitor: it disables each enabled
// endpoint whose failing_since is older than after (by the database clock)
// with cause Failing and the reason "every attempt failed since <RFC 3339
// time>", logs each at Warn, and returns their names. Each endpoint is
// disabled in its own transaction; the first error ends the pass.
func (s *Store) DisableFailing(ctx context.Context, after time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, failingSQL, after.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("find failing endpoints: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find failing endpoints: %w", err)
	}
	var names []string
	for _, id := range ids {
		name, err := s.disableFailing(ctx, id, after)
		if err != nil {
			return names, err
		}
		if name != "" {
			names = append(names, name)
		}
	}
	return names, nil
}

// disableFailing disables the endpoint id if it is still failing, and
// returns its name ("" when it no longer was).
func (s *Store) disableFailing(ctx context.Context, id string, after time.Duration) (string, error) {
	var name string
	var since time.Time
	var moved int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, lockFailingSQL, id, after.Microseconds()).Scan(&name, &since); err != nil {
			return err
		}
		reason := "every attempt failed since " + since.UTC().Format(time.RFC3339)
		return tx.QueryRow(ctx, disableSQL, id, reason).Scan(&moved)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("disable failing endpoint %s: %w", id, err)
	}
	s.m.disabled.WithLabelValues(string(Failing)).Inc()
	s.log.Warn("endpoints: every attempt failed for too long; endpoint disabled, its pending deliveries dead-lettered",
		"endpoint", name, "moved", moved, "failing_since", since.UTC(), "failing_for", s.now().Sub(since).Round(time.Second).String(), "disable_after", after.String())
	return name, nil
}

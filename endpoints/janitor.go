package endpoints

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// JanitorEveryDefault is the janitor's period when RunJanitor is given none.
const JanitorEveryDefault = 10 * time.Second

// RunJanitor, every every (JanitorEveryDefault when 0), disables the
// endpoints whose every attempt has failed for after (0: never) and erases
// the previous secrets whose grace period has ended; the first pass runs
// at once. The first pass of each minute (by Config.Now) also does the
// janitor's slower work, one statement each: it samples every endpoint's
// backlog for the console's charts (of which one worker's writes the
// minute's sample: outbox.Store.SampleBacklog), and writes the operator
// event fluxora.endpoint.certificate_expiring about the client
// certificates that expire within 14 days (once a day each, when an
// endpoint subscribes to it). It returns nil when ctx ends; a failed pass
// is logged and the next one runs.
func (s *Store) RunJanitor(ctx context.Context, every, after time.Duration) error {
	if after < 0 || every < 0 {
		return errors.New("endpoints: janitor: every and after must not be negative")
	}
	if every == 0 {
		every = JanitorEveryDefault
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var minute time.Time // the minute of the last pass that did the slower work
	for {
		if m := s.now().Truncate(time.Minute); !m.Equal(minute) {
			minute = m
			if _, err := s.db.SampleBacklog(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("endpoints: backlog not sampled", "error", err)
			}
			if _, err := s.db.NoteExpiringCertificates(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("endpoints: expiring certificates not noted", "error", err)
			}
		}
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
	ids, err := s.db.FailingEndpoints(ctx, after)
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
	d, ok, err := s.db.DisableFailingEndpoint(ctx, id, after, failingReason)
	if err != nil {
		return "", fmt.Errorf("disable failing endpoint %s: %w", id, err)
	} else if !ok {
		return "", nil
	}
	s.m.disabled.WithLabelValues(string(Failing)).Inc()
	s.log.Warn("endpoints: every attempt failed for too long; endpoint disabled, its pending deliveries dead-lettered",
		"endpoint", d.Name, "moved", d.Moved, "failing_since", d.Since.UTC(), "failing_for", s.now().Sub(d.Since).Round(time.Second).String(), "disable_after", after.String())
	return d.Name, nil
}

// failingReason is the reason the janitor gives an endpoint failing since
// since: "every attempt failed since <RFC 3339 time, UTC>".
func failingReason(since time.Time) string {
	return "every attempt failed since " + since.UTC().Format(time.RFC3339)
}

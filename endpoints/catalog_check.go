package endpoints

import (
	"context"
	"fmt"

	"github.com/fluxora/webhook-worker/eventtypes"
)

// checkCatalog refuses, as a *FieldError of events, a subscription the
// event catalog does not know (eventtypes.CheckSubscription): a type it
// does not list ("did you mean" the closest), a pattern that matches none
// of its types. An empty catalog, or subscribing to every type, checks
// nothing.
func (s *Store) checkCatalog(ctx context.Context, events []string) error {
	if len(events) == 0 {
		return nil
	}
	names, err := s.db.EventTypeNames(ctx)
	if err != nil {
		return fmt.Errorf("read the event catalog: %w", err)
	}
	if err := eventtypes.CheckSubscription(names, events); err != nil {
		return invalid("events", "%s", err)
	}
	return nil
}

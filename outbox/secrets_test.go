package outbox_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
)

// A rotation returns the endpoint as the catalog reads it, every field
// (rotate_secret writes out the catalog's columns).
func TestRotationReturnsTheCatalogsEndpoint(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	id := endpoint(t, db, "shop", false)
	exec(t, db, `UPDATE webhook_endpoints SET event_types = '{a.b,c.d}', retry_rps = 7, disabled_reason = 'by hand',
		disabled_at = now() - interval '1 hour', failing_since = now() - interval '2 hours', last_error = 'timeout',
		last_status = 503, last_error_at = now() - interval '1 minute' WHERE id = $1`, id)
	rotate := func(_, current string) (outbox.Rotation, error) {
		return outbox.Rotation{Secret: "whsec_y", Previous: current}, nil
	}
	got, err := s.RotateEndpointSecret(ctx, "shop", rotate, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Endpoint(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rotation returned\n%+v\nthe catalog reads\n%+v", got, want)
	}
	if got.ID != id || got.PreviousSecretUntil == nil || got.FailingSince == nil || got.LastStatus != 503 || len(got.EventTypes) != 2 {
		t.Fatalf("rotation returned %+v", got)
	}
}

package dispatcher

import (
	"slices"
	"testing"
)

// A claim never asks for more rows than the endpoint with the least room
// can take, and leaves out the endpoints within a few slots of their cap,
// so it never brings back rows it must give back unattempted.
func TestQueryRespectsEndpointRoom(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{cfg: Config{BatchSize: 10, EndpointConcurrency: 25, EnvEndpoint: true}, held: map[string]int{}}
	for _, tc := range []struct {
		name      string
		endpoints int
		held      map[string]int
		limit     int
		want      Query
	}{
		{"only WEBHOOK_URL: no cap at all", 0, map[string]int{"": 90}, 10, Query{Limit: 10}},
		{"room everywhere", 3, map[string]int{"": 3, "a": 5}, 10, Query{Limit: 10}},
		{"the least room bounds the claim", 3, map[string]int{"a": 20, "b": 1}, 10, Query{Limit: 5}},
		{"at the cap: skipped", 3, map[string]int{"a": 25, "b": 2}, 10, Query{Limit: 10, Skip: []string{"a"}}},
		{"within a few slots of it: skipped too", 3, map[string]int{"a": 24, "": 24, "b": 23}, 10, Query{Limit: 2, Skip: []string{"a"}, SkipEnv: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.endpoints, d.held = tc.endpoints, tc.held
			got := d.query(tc.limit)
			slices.Sort(got.Skip)
			if got.Limit != tc.want.Limit || got.SkipEnv != tc.want.SkipEnv || !slices.Equal(got.Skip, tc.want.Skip) {
				t.Fatalf("query(%d) = %+v, want %+v", tc.limit, got, tc.want)
			}
		})
	}
	d.cfg.EnvEndpoint = false
	d.endpoints, d.held = 2, map[string]int{}
	if q := d.query(10); !q.SkipEnv {
		t.Fatalf("no WEBHOOK_URL endpoint: its rows must be left to a worker that has one: %+v", q)
	}
	d.cfg.BatchSize, d.cfg.EndpointConcurrency = 100, 50
	if q := d.query(100); q.Limit != 50 {
		t.Fatalf("a batch larger than the cap: limit %d, want 50", q.Limit)
	}
}

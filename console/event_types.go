package console

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/fluxora/webhook-worker/webhook"
)

// EventTypes is the event catalog as the console shows it: strict mode
// and every type (GET /api/event-types).
type EventTypes struct {
	Strict bool        `json:"strict"`
	Types  []EventType `json:"types"`
}

// EventType is one type of the catalog, its schema and example indented
// for reading.
type EventType struct {
	webhook.EventType
	SchemaText  string `json:"-"`
	ExampleText string `json:"-"`
}

// eventTypesHandler is /event-types and GET /api/event-types.
func (s *Server) eventTypesHandler(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, "eventtypes", func(ctx context.Context) (any, error) { return s.eventTypes(ctx) })
}

func (s *Server) eventTypes(ctx context.Context) (EventTypes, error) {
	st, err := s.cfg.Store.EventCatalogState(ctx)
	if err != nil {
		return EventTypes{}, err
	}
	types, err := s.cfg.Store.EventTypes(ctx)
	if err != nil {
		return EventTypes{}, err
	}
	out := EventTypes{Strict: st.Strict, Types: make([]EventType, len(types))}
	for i, t := range types {
		out.Types[i] = EventType{EventType: t, SchemaText: indented(t.Schema), ExampleText: indented(t.Example)}
	}
	return out, nil
}

// indented is JSON text indented by two spaces; "" for none.
func indented(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

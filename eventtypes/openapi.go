package eventtypes

import (
	"encoding/json"
	"strconv"

	"github.com/fluxora/webhook-worker/webhook"
)

// OpenAPIInfo is the document's info object: its title and the API's
// version (the catalog's version when empty).
type OpenAPIInfo struct {
	Title   string
	Version string
}

// OpenAPI returns the catalog as an OpenAPI 3.1 document (JSON, which is
// YAML too): its webhooks section lists every type as a POST whose request
// body is the type's schema (any JSON without one) with its example, and
// the headers every delivery carries; components.securitySchemes describe
// the two signature headers. It is what a consumer feeds to its code
// generator. The schemas are the catalog's, as stored: JSON Schema 2020-12
// is OpenAPI 3.1's own dialect.
func (c *Catalog) OpenAPI(info OpenAPIInfo) ([]byte, error) {
	if info.Title == "" {
		info.Title = "Webhooks"
	}
	if info.Version == "" {
		info.Version = strconv.FormatInt(c.version, 10)
	}
	hooks := make(map[string]pathItem, len(c.names))
	for _, n := range c.names {
		hooks[n] = pathItem{Post: operation(c.types[n].t)}
	}
	doc := document{
		OpenAPI:           "3.1.0",
		Info:              infoObject{Title: info.Title, Version: info.Version, Description: docDescription},
		JSONSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
		Webhooks:          hooks,
		Components: components{SecuritySchemes: map[string]securityScheme{
			"standardWebhooks": {Type: "apiKey", In: "header", Name: "webhook-signature", Description: standardDescription},
			"fluxoraSignature": {Type: "apiKey", In: "header", Name: "x-fluxora-signature", Description: fluxoraDescription},
		}},
	}
	return json.MarshalIndent(doc, "", "  ")
}

const (
	docDescription = "The events this service sends as webhooks: each is a POST of the event's payload as JSON, " +
		"signed, with the headers listed. Answer 2xx once the event is safely yours; deduplicate by webhook-id."
	standardDescription = "Standard Webhooks signature (https://www.standardwebhooks.com): \"v1,\" and the base64 " +
		"HMAC-SHA256, keyed with the decoded secret, of webhook-id + \".\" + webhook-timestamp + \".\" + body; " +
		"two of them, space-separated, during a secret rotation."
	fluxoraDescription = "Fluxora signature: the lowercase hex HMAC-SHA256, keyed with the whole secret string, " +
		"of x-fluxora-timestamp + \".\" + body."
)

// operation is the POST of one type.
func operation(t webhook.EventType) *operationObject {
	schema := json.RawMessage(`{}`)
	if len(t.Schema) > 0 {
		schema = t.Schema
	}
	return &operationObject{
		Summary:     t.Name,
		Description: t.Description,
		Deprecated:  t.Deprecated,
		Parameters:  deliveryHeaders(t.Name),
		RequestBody: requestBody{Required: true, Content: map[string]mediaType{
			"application/json": {Schema: schema, Example: t.Example},
		}},
		Security: []map[string][]string{{"standardWebhooks": {}}, {"fluxoraSignature": {}}},
		Responses: map[string]response{
			"2XX": {Description: "Delivered."},
			"410": {Description: "Gone: the endpoint is disabled."},
			"429": {Description: "Retried later, after Retry-After."},
			"5XX": {Description: "Retried later."},
		},
	}
}

// deliveryHeaders are the headers every delivery of an event of type name
// carries (docs/consumers.md, "What arrives").
func deliveryHeaders(name string) []parameter {
	str := json.RawMessage(`{"type": "string"}`)
	event, _ := json.Marshal(map[string]string{"type": "string", "const": name})
	h := func(n, d string, required bool, s json.RawMessage) parameter {
		return parameter{Name: n, In: "header", Description: d, Required: required, Schema: s}
	}
	return []parameter{
		h("webhook-id", "The delivery id, a UUID: the same on every attempt and on a replay (with the Standard Webhooks headers).",
			false, json.RawMessage(`{"type": "string", "format": "uuid"}`)),
		h("webhook-timestamp", "When this attempt was signed, in Unix seconds (with the Standard Webhooks headers).", false, str),
		h("x-fluxora-delivery-id", "The delivery id (webhook-id).", true, json.RawMessage(`{"type": "string", "format": "uuid"}`)),
		h("x-fluxora-event", "The event type.", true, event),
		h("x-fluxora-attempt", "1 for the first attempt, then 2, 3, …", true, json.RawMessage(`{"type": "string", "pattern": "^[1-9][0-9]*$"}`)),
		h("x-fluxora-endpoint", "The endpoint's name.", true, str),
		h("x-fluxora-timestamp", "When this attempt was signed, in Unix seconds.", true, str),
		h("webhook-ordering-key", "The event's ordering key, when it has one.", false, str),
		h("webhook-sequence", "With the ordering key: this event's place among the key's deliveries to the endpoint.", false, str),
	}
}

// The OpenAPI objects the document uses, in the specification's order.
type (
	document struct {
		OpenAPI           string              `json:"openapi"`
		Info              infoObject          `json:"info"`
		JSONSchemaDialect string              `json:"jsonSchemaDialect"`
		Webhooks          map[string]pathItem `json:"webhooks"`
		Components        components          `json:"components"`
	}
	infoObject struct {
		Title       string `json:"title"`
		Version     string `json:"version"`
		Description string `json:"description,omitempty"`
	}
	pathItem struct {
		Post *operationObject `json:"post"`
	}
	operationObject struct {
		Summary     string                `json:"summary"`
		Description string                `json:"description,omitempty"`
		Deprecated  bool                  `json:"deprecated,omitempty"`
		Parameters  []parameter           `json:"parameters"`
		RequestBody requestBody           `json:"requestBody"`
		Security    []map[string][]string `json:"security"`
		Responses   map[string]response   `json:"responses"`
	}
	parameter struct {
		Name        string          `json:"name"`
		In          string          `json:"in"`
		Description string          `json:"description,omitempty"`
		Required    bool            `json:"required,omitempty"`
		Schema      json.RawMessage `json:"schema"`
	}
	requestBody struct {
		Required bool                 `json:"required"`
		Content  map[string]mediaType `json:"content"`
	}
	mediaType struct {
		Schema  json.RawMessage `json:"schema"`
		Example json.RawMessage `json:"example,omitempty"`
	}
	response struct {
		Description string `json:"description"`
	}
	components struct {
		SecuritySchemes map[string]securityScheme `json:"securitySchemes"`
	}
	securityScheme struct {
		Type        string `json:"type"`
		In          string `json:"in"`
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
	}
)

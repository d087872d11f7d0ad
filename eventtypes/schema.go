package eventtypes

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ErrSchemaBroken: the type's schema in the catalog does not compile, so
// its payloads cannot be checked. The producer kit refuses such an event;
// the worker leaves its deliveries pending until the schema is fixed.
var ErrSchemaBroken = errors.New("the event type's schema does not compile")

// Schema is one type's JSON Schema, compiled.
type Schema struct{ s *jsonschema.Schema }

// Compile compiles the JSON Schema doc of the type name: draft 2020-12
// unless its "$schema" names another, formats asserted (a "date-time"
// that is not one is refused). A "$ref" may point within the document
// and to the JSON Schema meta-schemas only: the worker never reads a file
// or the network for a schema stored in the database.
func Compile(name string, doc []byte) (*Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	// A base of its own that no loader serves (.invalid never resolves,
	// and noLoader reads nothing): a relative "$ref" fails to load.
	loc := "https://fluxora.invalid/event-types/" + url.PathEscape(name)
	if err := c.AddResource(loc, v); err != nil {
		return nil, err
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, err
	}
	return &Schema{s}, nil
}

// noLoader refuses every "$ref" outside the document (the meta-schemas
// are the library's own, embedded, and never reach a loader).
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, errors.New(`only a "$ref" within the schema is allowed`)
}

// PayloadError says why a payload does not match its type's schema. Its
// text names the places (JSON pointers) and the rules, never a value of
// the payload: it reaches the dead letter and the worker's log.
type PayloadError struct {
	Type string
	// Problems are the first few, each "/path: rule"; More is how many
	// more there were.
	Problems []string
	More     int
}

func (e *PayloadError) Error() string {
	s := "payload does not match the schema of " + e.Type + ": " + strings.Join(e.Problems, "; ")
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more)", e.More)
	}
	return s
}

// maxProblems is how many of a payload's problems PayloadError names.
const maxProblems = 3

// Validate checks payload, the JSON text of an event of type eventType.
func (s *Schema) Validate(eventType string, payload []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return &PayloadError{Type: eventType, Problems: []string{"not JSON"}}
	}
	err = s.s.Validate(v)
	var ve *jsonschema.ValidationError
	if err == nil || !errors.As(err, &ve) {
		return err
	}
	var leaves []*jsonschema.ValidationError
	collectLeaves(ve, &leaves)
	pe := &PayloadError{Type: eventType}
	for _, l := range leaves {
		if len(pe.Problems) == maxProblems {
			pe.More++
			continue
		}
		pe.Problems = append(pe.Problems, pointer(l.InstanceLocation)+": "+rule(l.ErrorKind))
	}
	return pe
}

// collectLeaves appends the errors of ve that have no causes: the rules
// that failed, not the groups ("allOf failed") around them.
func collectLeaves(ve *jsonschema.ValidationError, out *[]*jsonschema.ValidationError) {
	if len(ve.Causes) == 0 {
		*out = append(*out, ve)
		return
	}
	for _, c := range ve.Causes {
		collectLeaves(c, out)
	}
}

// pointer is a JSON pointer ("/items/0/id"); "/" for the payload itself.
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	r := strings.NewReplacer("~", "~0", "/", "~1")
	var b strings.Builder
	for _, p := range loc {
		b.WriteString("/" + r.Replace(p))
	}
	return b.String()
}

var printer = message.NewPrinter(language.English)

// rule says which rule failed without quoting the payload: the library's
// own text where it holds only the schema's values, types, counts and
// property names; its keyword and the schema's bound where its text would
// quote the payload's value (a pattern, a format, a number).
func rule(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Format:
		return "not a valid " + k.Want
	case *kind.Pattern:
		return "does not match pattern " + strconv.Quote(k.Want)
	case *kind.Minimum:
		return "minimum: want " + k.Want.RatString()
	case *kind.Maximum:
		return "maximum: want " + k.Want.RatString()
	case *kind.ExclusiveMinimum:
		return "exclusiveMinimum: want " + k.Want.RatString()
	case *kind.ExclusiveMaximum:
		return "exclusiveMaximum: want " + k.Want.RatString()
	case *kind.MultipleOf:
		return "multipleOf: want " + k.Want.RatString()
	case *kind.ContentEncoding:
		return "not " + k.Want + " encoded"
	case *kind.ContentMediaType:
		return "not of media type " + k.Want
	case *kind.InvalidJsonValue:
		return "not a JSON value"
	case *kind.Type, *kind.Required, *kind.Enum, *kind.Const, *kind.MinProperties, *kind.MaxProperties,
		*kind.MinItems, *kind.MaxItems, *kind.AdditionalItems, *kind.MinLength, *kind.MaxLength,
		*kind.FalseSchema, *kind.UniqueItems, *kind.Contains, *kind.MinContains, *kind.MaxContains,
		*kind.AdditionalProperties, *kind.PropertyNames, *kind.DependentRequired, *kind.Dependency,
		*kind.OneOf, *kind.AnyOf, *kind.AllOf, *kind.Not:
		return k.LocalizedString(printer)
	}
	return strings.TrimSpace("fails " + strings.Join(k.KeywordPath(), "/"))
}

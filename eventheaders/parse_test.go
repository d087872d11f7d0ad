package eventheaders

import (
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		want []Field
		err  string
	}{
		{"", nil, ""},
		{`{}`, nil, ""},
		{`{"b": "2", "a": "1\u00e9\n"}`, []Field{{"b", "2"}, {"a", "1é\n"}}, ""}, // order kept; rules are Check's
		{`{"a": "1"} x`, nil, "must be a JSON object of string values"},
		{`{"a": "1"`, nil, "must be a JSON object of string values"},
		{`["a"]`, nil, "must be a JSON object of string values"},
		{`{"a": true}`, nil, `"a": the value must be a string without CR, LF or control characters`},
		{`{"a": ["x"]}`, nil, `"a": the value must be a string`},
	} {
		got, err := Parse([]byte(tc.text))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want error %q", tc.text, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.text, got, err, tc.want)
		}
	}
}

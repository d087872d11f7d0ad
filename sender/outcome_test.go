package sender_test

import (
	"testing"

	"github.com/fluxora/webhook-worker/sender"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		want   sender.Outcome
	}{
		{200, sender.Delivered}, {201, sender.Delivered}, {204, sender.Delivered}, {299, sender.Delivered},
		{408, sender.Retryable}, {429, sender.Retryable}, {500, sender.Retryable},
		{502, sender.Retryable}, {503, sender.Retryable}, {599, sender.Retryable},
		{0, sender.Permanent}, {101, sender.Permanent}, {199, sender.Permanent},
		{300, sender.Permanent}, {301, sender.Permanent}, {302, sender.Permanent}, {304, sender.Permanent},
		{307, sender.Permanent}, {308, sender.Permanent}, {400, sender.Permanent}, {401, sender.Permanent},
		{404, sender.Permanent}, {409, sender.Permanent}, {410, sender.Permanent}, {413, sender.Permanent},
		{600, sender.Permanent}, {-1, sender.Permanent},
	}
	for _, tt := range tests {
		if got := sender.Classify(tt.status); got != tt.want {
			t.Errorf("Classify(%d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestOutcomeString(t *testing.T) {
	t.Parallel()
	for o, want := range map[sender.Outcome]string{
		sender.Delivered: "delivered",
		sender.Retryable: "retryable",
		sender.Permanent: "permanent",
		"":               "unknown",
		"bogus":          "unknown",
	} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%q).String() = %q, want %q", string(o), got, want)
		}
	}
}

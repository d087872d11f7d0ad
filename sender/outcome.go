package sender

import "github.com/fluxora/webhook-worker/webhook"

// Outcome is how one delivery attempt ended: the domain's Class
// (delivered, retryable, permanent; its String is a bounded metric label).
type Outcome = webhook.Class

// The outcomes of Send and Classify (webhook's classes).
const (
	// Delivered means the consumer answered 2xx.
	Delivered = webhook.Delivered
	// Retryable means a network error, a timeout, a canceled context,
	// response headers over Config.MaxResponseHeaderBytes, or status 408,
	// 429 or 5xx: the same request may succeed later.
	Retryable = webhook.Retryable
	// Permanent means any other status, 3xx included (redirects are never
	// followed), or a request that cannot be built (for example a header
	// value with CR or LF): sending it again will not help.
	Permanent = webhook.Permanent
)

// Classify maps an HTTP status code to an Outcome: 2xx is Delivered; 408,
// 429 and 5xx are Retryable; everything else, 3xx included, is Permanent.
func Classify(status int) Outcome {
	switch {
	case status >= 200 && status <= 299:
		return Delivered
	case status == 408, status == 429, status >= 500 && status <= 599:
		return Retryable
	default:
		return Permanent
	}
}

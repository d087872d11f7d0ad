package sender

// Outcome is how one delivery attempt ended.
type Outcome int

// The outcomes of Send and Classify.
const (
	// Delivered means the consumer answered 2xx.
	Delivered Outcome = iota + 1
	// Retryable means a network error, a timeout, a canceled context,
	// response headers over Config.MaxResponseHeaderBytes, or status 408,
	// 429 or 5xx: the same request may succeed later.
	Retryable
	// Permanent means any other status, 3xx included (redirects are never
	// followed), or a request that cannot be built (for example a header
	// value with CR or LF): sending it again will not help.
	Permanent
)

// String returns "delivered", "retryable" or "permanent", and "unknown" for
// any other value, so that it is safe as a bounded metric label.
func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Retryable:
		return "retryable"
	case Permanent:
		return "permanent"
	default:
		return "unknown"
	}
}

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

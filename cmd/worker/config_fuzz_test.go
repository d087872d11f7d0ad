package main

import (
	"strings"
	"testing"
)

// FuzzLoadConfig: any value of any variable is either accepted or refused
// with an error that names the variable; the values of the variables that
// carry credentials (the URLs, the secret) are never echoed. Plain numeric
// and enum variables may quote their bad value.
func FuzzLoadConfig(f *testing.F) {
	names := []string{"DATABASE_URL", "WEBHOOK_URL", "WEBHOOK_POLL_INTERVAL_MS", "WEBHOOK_BATCH_SIZE", "WEBHOOK_MAX_ATTEMPTS",
		"WEBHOOK_BACKOFF_BASE_MS", "WEBHOOK_BACKOFF_MAX_MS", "WEBHOOK_TIMEOUT_MS", "WEBHOOK_CONCURRENCY", "WEBHOOK_METRICS_ADDR",
		"WEBHOOK_SHUTDOWN_TIMEOUT_MS", "REDIS_URL", "WEBHOOK_RETRY_RPS", "WEBHOOK_CIRCUIT_BREAKER_THRESHOLD",
		"WEBHOOK_CIRCUIT_BREAKER_RESET_MS", "WEBHOOK_GATE_TIMEOUT_MS", "WEBHOOK_RETENTION", "LOG_FORMAT", "LOG_LEVEL"}
	for i, v := range []string{"", "0", "-1", "10", "1e9", "99999999999999999999", "https://u:FUZZPW9@h/", "redis://:FUZZPW9@h:1",
		"postgres://u:FUZZPW9@h:x/db", "7d", "off", "text", "debug", "\x00\r\n"} {
		f.Add(uint8(i), v)
	}
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		env := validEnv()
		name := names[int(which)%len(names)]
		env[name] = value
		_, err := loadConfig(func(k string) string { return env[k] })
		if err == nil {
			return
		}
		msg := err.Error()
		if !strings.Contains(msg, name) {
			t.Fatalf("error for %s=%q does not name it: %s", name, value, msg)
		}
		if !strings.HasSuffix(name, "_URL") {
			return
		}
		for _, secret := range []string{"whsec_do_not_print", "s3cretpw", "FUZZPW9"} {
			if strings.Contains(msg, secret) {
				t.Fatalf("error for %s=%q leaks %q: %s", name, value, secret, msg)
			}
		}
	})
}

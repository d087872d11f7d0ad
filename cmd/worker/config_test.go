package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func validEnv() map[string]string {
	return map[string]string{
		"DATABASE_URL":   "postgres://app:s3cretpw@127.0.0.1:5432/app",
		"WEBHOOK_URL":    "https://hooks.example.com/fluxora",
		"WEBHOOK_SECRET": "whsec_do_not_print",
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	env := validEnv()
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.PollInterval != 10*time.Second || c.BatchSize != 10 || c.MaxAttempts != 16 || c.BackoffBase != time.Second ||
		c.BackoffMax != time.Hour || c.Timeout != 10*time.Second || c.Concurrency != 100 || c.MetricsAddr != ":9464" ||
		c.ShutdownTimeout != 30*time.Second || c.RetryRPS != 10 || c.BreakerThreshold != 0 ||
		c.BreakerReset != 5*time.Minute || c.Retention != 7*24*time.Hour || c.LogFormat != "json" ||
		c.EndpointConcurrency != 25 || c.DisableAfter != 5*24*time.Hour || !c.EgressAllowLoopback || len(c.EgressAllow) != 0 ||
		c.MaxResponseHeaderBytes != 65536 {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestConfigRejectsBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value string }{
		{"DATABASE_URL", ""},
		{"DATABASE_URL", "postgres://app:s3cretpw@127.0.0.1:notaport/app"},
		{"WEBHOOK_URL", ""},
		{"WEBHOOK_URL", "http://hooks.example.com/plain-http"},
		{"WEBHOOK_URL", "https://user:s3cretpw@hooks.example.com/"},
		{"WEBHOOK_URL", "ftp://hooks.example.com/"},
		{"WEBHOOK_URL", "not a url"},
		{"WEBHOOK_SECRET", ""},
		{"WEBHOOK_POLL_INTERVAL_MS", "0"},
		{"WEBHOOK_POLL_INTERVAL_MS", "ten"},
		{"WEBHOOK_BATCH_SIZE", "0"},
		{"WEBHOOK_BATCH_SIZE", "-3"},
		{"WEBHOOK_BATCH_SIZE", "100000"},
		{"WEBHOOK_MAX_ATTEMPTS", "0"},
		{"WEBHOOK_BACKOFF_BASE_MS", "1.5"},
		{"WEBHOOK_BACKOFF_MAX_MS", "1"}, // below the base
		{"WEBHOOK_TIMEOUT_MS", "0"},
		{"WEBHOOK_CONCURRENCY", "0"},
		{"WEBHOOK_MAX_RESPONSE_HEADER_BYTES", "1023"},
		{"WEBHOOK_MAX_RESPONSE_HEADER_BYTES", "16777217"},
		{"WEBHOOK_MAX_RESPONSE_HEADER_BYTES", "64KiB"},
		{"WEBHOOK_MAX_RESPONSE_HEADER_BYTES", "-1"},
		{"WEBHOOK_METRICS_ADDR", "9464"},
		{"WEBHOOK_METRICS_ADDR", ":99999"},
		{"WEBHOOK_METRICS_ADDR", ":65536"},
		{"WEBHOOK_METRICS_ADDR", ":-1"},
		{"WEBHOOK_METRICS_ADDR", "127.0.0.1:"},
		{"WEBHOOK_METRICS_ADDR", "::1:9464"},
		{"WEBHOOK_METRICS_ADDR", ":metrics"},
		{"WEBHOOK_SHUTDOWN_TIMEOUT_MS", "-1"},
		{"REDIS_URL", "http://redis:s3cretpw@localhost"},
		{"WEBHOOK_RETRY_RPS", "0"},
		{"WEBHOOK_CIRCUIT_BREAKER_THRESHOLD", "-1"},
		{"WEBHOOK_CIRCUIT_BREAKER_RESET_MS", "soon"},
		{"WEBHOOK_GATE_TIMEOUT_MS", "0"},
		{"WEBHOOK_GATE_TIMEOUT_MS", "60000"},
		{"WEBHOOK_RETENTION", "yesterday"},
		{"WEBHOOK_RETENTION", "106752d"},
		{"WEBHOOK_RETENTION", "9999999999h"},
		{"WEBHOOK_RETENTION", "1e30s"},
		{"WEBHOOK_RETENTION", "36501d"},
		{"WEBHOOK_ENDPOINT_DISABLE_AFTER", "106752d"},
		{"WEBHOOK_ENDPOINT_CONCURRENCY", "0"},
		{"WEBHOOK_ENDPOINT_CONCURRENCY", "many"},
		{"WEBHOOK_ENDPOINT_DISABLE_AFTER", "5s"},
		{"WEBHOOK_ENDPOINT_DISABLE_AFTER", "soon"},
		{"WEBHOOK_EGRESS_ALLOW", "10.0.0.0/33"},
		{"WEBHOOK_EGRESS_ALLOW", "10.0.0.0/8,intranet"},
		{"WEBHOOK_EGRESS_ALLOW_LOOPBACK", "maybe"},
		{"WEBHOOK_EGRESS_ALLOW_ALL", "maybe"},
		{"WEBHOOK_SIGNATURE_HEADERS", "svix"},
		{"LOG_FORMAT", "xml"},
		{"LOG_LEVEL", "loud"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			env := validEnv()
			env[tc.name] = tc.value
			_, err := loadConfig(func(k string) string { return env[k] })
			if err == nil {
				t.Fatalf("%s=%q accepted", tc.name, tc.value)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.name) {
				t.Fatalf("error does not name %s: %s", tc.name, msg)
			}
			for _, secret := range []string{"s3cretpw", "whsec_do_not_print"} {
				if strings.Contains(msg, secret) {
					t.Fatalf("error leaks a secret: %s", msg)
				}
			}
		})
	}
}

func TestConfigMaxResponseHeaderBytesRange(t *testing.T) {
	t.Parallel()
	for _, v := range []int64{1024, 65536, 16 << 20} {
		env := validEnv()
		env["WEBHOOK_MAX_RESPONSE_HEADER_BYTES"] = " " + strconv.FormatInt(v, 10)
		c, err := loadConfig(func(k string) string { return env[k] })
		if err != nil || c.MaxResponseHeaderBytes != v {
			t.Errorf("%d: got %d, %v", v, c.MaxResponseHeaderBytes, err)
		}
	}
	env := validEnv()
	env["WEBHOOK_MAX_RESPONSE_HEADER_BYTES"] = "512"
	_, err := loadConfig(func(k string) string { return env[k] })
	if want := `WEBHOOK_MAX_RESPONSE_HEADER_BYTES: must be a whole number from 1024 to 16777216, got "512"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestConfigAcceptsLoopbackHTTPAndOff(t *testing.T) {
	t.Parallel()
	env := validEnv()
	env["WEBHOOK_URL"] = "http://127.0.0.1:8080/hook"
	env["WEBHOOK_METRICS_ADDR"] = "off"
	env["WEBHOOK_RETENTION"] = "0"
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsAddr != "" || c.Retention != 0 {
		t.Fatalf("got %+v", c)
	}
}

// Without WEBHOOK_URL and WEBHOOK_SECRET the worker delivers only to the
// endpoints of webhook_endpoints; one without the other is refused.
func TestConfigEnvEndpointIsOptional(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://app@127.0.0.1:5432/app",
		"WEBHOOK_CONCURRENCY": "40", "WEBHOOK_ENDPOINT_DISABLE_AFTER": "0"}
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.WebhookURL != "" || len(c.Secret) != 0 || c.EndpointConcurrency != 10 || c.DisableAfter != 0 {
		t.Fatalf("got %+v", c)
	}
	env["WEBHOOK_SECRET"] = "whsec_do_not_print"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "WEBHOOK_URL: is required when WEBHOOK_SECRET is set") {
		t.Fatalf("secret without URL: %v", err)
	}
	delete(env, "WEBHOOK_SECRET")
	env["WEBHOOK_URL"] = "https://hooks.example.com/"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "WEBHOOK_SECRET: is required when WEBHOOK_URL is set") {
		t.Fatalf("URL without secret: %v", err)
	}
}

func TestConfigEgress(t *testing.T) {
	t.Parallel()
	env := validEnv()
	env["WEBHOOK_EGRESS_ALLOW"] = " 10.1.0.0/16, fd12::/16,192.168.7.9 "
	env["WEBHOOK_EGRESS_ALLOW_LOOPBACK"] = "false"
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.EgressAllowLoopback || len(c.EgressAllow) != 3 || c.EgressAllow[2].String() != "192.168.7.9/32" {
		t.Fatalf("got %v %v", c.EgressAllowLoopback, c.EgressAllow)
	}
	// A WEBHOOK_URL whose address the guard refuses is a start-up error,
	// unless the allow list opens it.
	env["WEBHOOK_URL"] = "https://10.9.9.9/hooks"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "WEBHOOK_URL: its address is 10.9.9.9, private") {
		t.Fatalf("private WEBHOOK_URL: %v", err)
	}
	env["WEBHOOK_EGRESS_ALLOW"] = "10.9.0.0/16"
	if _, err := loadConfig(func(k string) string { return env[k] }); err != nil {
		t.Fatalf("allowed private WEBHOOK_URL: %v", err)
	}
	env["WEBHOOK_URL"] = "https://169.254.169.254/latest"
	env["WEBHOOK_EGRESS_ALLOW"] = "169.254.0.0/16"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "link-local") {
		t.Fatalf("metadata WEBHOOK_URL: %v", err)
	}
}

func TestConfigPreviousSecret(t *testing.T) {
	t.Parallel()
	env := validEnv()
	env["WEBHOOK_SECRET_PREVIOUS"] = "whsec_old_do_not_print"
	env["WEBHOOK_SECRET_PREVIOUS_UNTIL"] = "2026-12-05T09:00:00+01:00"
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if string(c.SecretPrevious) != "whsec_old_do_not_print" || !c.SecretPreviousUntil.Equal(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("got %q until %s", c.SecretPrevious, c.SecretPreviousUntil)
	}
	for _, tc := range []struct {
		set, unset []string
		until      string
		want       string
	}{
		{unset: []string{"WEBHOOK_SECRET_PREVIOUS_UNTIL"}, want: "WEBHOOK_SECRET_PREVIOUS_UNTIL: is required when WEBHOOK_SECRET_PREVIOUS is set"},
		{unset: []string{"WEBHOOK_SECRET_PREVIOUS"}, want: "WEBHOOK_SECRET_PREVIOUS: is required when WEBHOOK_SECRET_PREVIOUS_UNTIL is set"},
		{until: "tomorrow", want: `WEBHOOK_SECRET_PREVIOUS_UNTIL: must be an RFC 3339 time such as 2026-12-05T09:00:00Z, got "tomorrow"`},
		{until: "2026-12-05 09:00", want: "WEBHOOK_SECRET_PREVIOUS_UNTIL: must be an RFC 3339 time"},
		{unset: []string{"WEBHOOK_URL", "WEBHOOK_SECRET"}, want: "WEBHOOK_SECRET_PREVIOUS: needs WEBHOOK_SECRET"},
	} {
		e := validEnv()
		e["WEBHOOK_SECRET_PREVIOUS"] = "whsec_old_do_not_print"
		e["WEBHOOK_SECRET_PREVIOUS_UNTIL"] = "2026-12-05T09:00:00Z"
		if tc.until != "" {
			e["WEBHOOK_SECRET_PREVIOUS_UNTIL"] = tc.until
		}
		for _, k := range tc.unset {
			delete(e, k)
		}
		_, err := loadConfig(func(k string) string { return e[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "do_not_print") {
			t.Errorf("%+v: the error quotes a secret: %v", tc, err)
		}
	}
}

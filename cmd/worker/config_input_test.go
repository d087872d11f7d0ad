package main

import (
	"strings"
	"testing"
)

// loadWith is loadConfig of validEnv with set applied ("" deletes).
func loadWith(set map[string]string) (config, error) {
	env := validEnv()
	for k, v := range set {
		if v == "" {
			delete(env, k)
		} else {
			env[k] = v
		}
	}
	return loadConfig(func(k string) string { return env[k] })
}

func TestConfigMetricsAddr(t *testing.T) {
	t.Parallel()
	for _, v := range []string{":9464", "127.0.0.1:0", "[::1]:65535", "0.0.0.0:9464", "metrics.internal:9464"} {
		if c, err := loadWith(map[string]string{"WEBHOOK_METRICS_ADDR": v}); err != nil || c.MetricsAddr != v {
			t.Errorf("%s: %q %v", v, c.MetricsAddr, err)
		}
	}
	// Reported with the other bad variables, at start-up.
	_, err := loadWith(map[string]string{"WEBHOOK_METRICS_ADDR": ":99999", "WEBHOOK_BATCH_SIZE": "0"})
	if err == nil || !strings.Contains(err.Error(), `WEBHOOK_METRICS_ADDR: must be host:port or :port with a port from 0 to 65535, or off, got ":99999"`) ||
		!strings.Contains(err.Error(), "WEBHOOK_BATCH_SIZE") {
		t.Fatalf("err = %v", err)
	}
}

// Entries of WEBHOOK_EGRESS_ALLOW that could never open what they name are
// refused, and the "everything" prefixes need WEBHOOK_EGRESS_ALLOW_ALL.
func TestConfigEgressAllowRefusesIneffectiveEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ entry, want string }{
		{"127.0.0.1", "127.0.0.1/32 is loopback, which this list cannot open: loopback is allowed unless WEBHOOK_EGRESS_ALLOW_LOOPBACK=false"},
		{"127.0.0.0/8", "WEBHOOK_EGRESS_ALLOW_LOOPBACK"},
		{"::1", "::1/128 is loopback"},
		{"::ffff:127.0.0.1", "127.0.0.1/32 is loopback"},
		{"0.0.0.0", "0.0.0.0/32 is unspecified, which the egress guard always refuses: it can never be allowed"},
		{"0.0.0.0/8", "is unspecified"},
		{"::", "::/128 is unspecified"},
		{"169.254.169.254", "is link-local, which the egress guard always refuses"},
		{"0.0.0.0/0", "0.0.0.0/0 opens several private ranges at once (all of them for 0.0.0.0/0 and ::/0): list the ranges meant (e.g. 10.1.0.0/16), or set WEBHOOK_EGRESS_ALLOW_ALL=true"},
		{"::/0", "WEBHOOK_EGRESS_ALLOW_ALL=true"},
		{"8.0.0.0/6", "WEBHOOK_EGRESS_ALLOW_ALL=true"},
		{"::ffff:0.0.0.0/96", "0.0.0.0/0 opens several"},
	} {
		_, err := loadWith(map[string]string{"WEBHOOK_EGRESS_ALLOW": "10.1.0.0/16, " + tc.entry})
		if err == nil || !strings.Contains(err.Error(), "WEBHOOK_EGRESS_ALLOW: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.entry, err, tc.want)
		}
	}
	c, err := loadWith(map[string]string{"WEBHOOK_EGRESS_ALLOW": "0.0.0.0/0,::/0", "WEBHOOK_EGRESS_ALLOW_ALL": "true"})
	if err != nil || len(c.EgressAllow) != 2 {
		t.Fatalf("confirmed: %v %v", c.EgressAllow, err)
	}
	// The confirmation opens wide prefixes, never loopback or unspecified.
	if _, err := loadWith(map[string]string{"WEBHOOK_EGRESS_ALLOW": "0.0.0.0", "WEBHOOK_EGRESS_ALLOW_ALL": "true"}); err == nil {
		t.Fatal("0.0.0.0 accepted with WEBHOOK_EGRESS_ALLOW_ALL")
	}
	// The widest ranges the list can open, and a mapped one, need no
	// confirmation.
	c, err = loadWith(map[string]string{"WEBHOOK_EGRESS_ALLOW": "10.0.0.0/8,fc00::/7,::ffff:192.168.0.0/112"})
	if err != nil || len(c.EgressAllow) != 3 || c.EgressAllow[2].String() != "192.168.0.0/16" {
		t.Fatalf("widest ranges: %v %v", c.EgressAllow, err)
	}
}

func TestConfigPreviousSecretMustDiffer(t *testing.T) {
	t.Parallel()
	_, err := loadWith(map[string]string{"WEBHOOK_SECRET_PREVIOUS": "whsec_do_not_print", "WEBHOOK_SECRET_PREVIOUS_UNTIL": "2026-12-05T09:00:00Z"})
	if err == nil || !strings.Contains(err.Error(), "WEBHOOK_SECRET_PREVIOUS: is the same as WEBHOOK_SECRET") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "do_not_print") {
		t.Fatalf("the error quotes the secret: %v", err)
	}
}

// The dispatcher exits 2 on these, before connecting to anything (its
// DATABASE_URL is a closed port, in case it tried), and never prints a
// secret.
func TestDispatcherExitsTwoOnBadInput(t *testing.T) {
	t.Parallel()
	for name, set := range map[string]map[string]string{
		"WEBHOOK_METRICS_ADDR":           {"WEBHOOK_METRICS_ADDR": ":99999"},
		"WEBHOOK_SECRET_PREVIOUS":        {"WEBHOOK_SECRET_PREVIOUS": "whsec_do_not_print", "WEBHOOK_SECRET_PREVIOUS_UNTIL": "2026-12-05T09:00:00Z"},
		"WEBHOOK_EGRESS_ALLOW":           {"WEBHOOK_EGRESS_ALLOW": "127.0.0.1,0.0.0.0/0"},
		"WEBHOOK_RETENTION":              {"WEBHOOK_RETENTION": "106752d"},
		"WEBHOOK_ENDPOINT_DISABLE_AFTER": {"WEBHOOK_ENDPOINT_DISABLE_AFTER": "9999999999h"},
	} {
		env := validEnv()
		env["DATABASE_URL"] = "postgres://app@127.0.0.1:1/app?connect_timeout=1"
		for k, v := range set {
			env[k] = v
		}
		var out, errb strings.Builder
		code := run(t.Context(), nil, func(k string) string { return env[k] }, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), name+": ") {
			t.Errorf("exit %d, want 2 naming %s:\n%s", code, name, errb.String())
		}
		if strings.Contains(errb.String(), "do_not_print") {
			t.Errorf("%s: prints a secret:\n%s", name, errb.String())
		}
	}
}

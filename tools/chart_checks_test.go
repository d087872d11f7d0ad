package tools

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The chart lints and renders with its defaults: the workers, the
// migration hook, the disruption budget and the metrics Service, each
// decoded strictly; the worker's own defaults are left to the worker.
func TestChartDefaults(t *testing.T) {
	t.Parallel()
	lint(t, nil)
	r := decodeAll(t, nil)
	if len(r.deployments) != 1 || r.deployments["worker"] == nil {
		t.Fatalf("deployments %v, want the worker's alone", keys(r.deployments))
	}
	if len(r.monitors) != 0 {
		t.Fatal("a ServiceMonitor without serviceMonitor.enabled")
	}
	if len(r.pdbs) != 1 || r.pdbs[0].Spec.MaxUnavailable.IntValue() != 1 {
		t.Fatalf("pod disruption budgets %+v, want one with maxUnavailable 1", r.pdbs)
	}
	d := r.deployments["worker"]
	c := d.Spec.Template.Spec.Containers[0]
	if want := "fluxora-webhook-worker:" + r.appVersion; c.Image != want {
		t.Errorf("image %q, want %q", c.Image, want)
	}
	checkWorker(t, r, 9464, 30000)
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	if want := []string{"DATABASE_URL", "WEBHOOK_METRICS_ADDR"}; !slices.Equal(names, want) {
		t.Errorf("environment %q, want %q: every other setting is the worker's default", names, want)
	}
}

// With every option on, the chart still lints and renders; every variable
// of docs/configuration.md reaches the worker or the console, and every
// credential comes from a Secret.
func TestChartAllOptions(t *testing.T) {
	t.Parallel()
	vals := allOn()
	lint(t, vals)
	r := decodeAll(t, vals)
	if r.deployments["worker"] == nil || r.deployments["console"] == nil {
		t.Fatalf("deployments %v, want worker and console", keys(r.deployments))
	}
	checkWorker(t, r, 9500, 60500)
	checkConsole(t, r)
	if len(r.monitors) != 1 || r.monitors[0].Spec.Endpoints[0].Port != "metrics" || r.monitors[0].Spec.Endpoints[0].Path != "/metrics" {
		t.Fatalf("service monitors %+v, want one scraping port metrics at /metrics", r.monitors)
	}
	if got := r.monitors[0].Metadata.Labels["release"]; got != "prom" {
		t.Errorf("service monitor label release %q, want prom", got)
	}
	env := map[string]corev1.EnvVar{}
	for _, d := range r.deployments {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e
		}
	}
	for _, name := range documentedVars(t) {
		if _, ok := env[name]; !ok {
			t.Errorf("%s (docs/configuration.md) cannot be set through the chart's values", name)
		}
	}
	for _, name := range secretVars {
		if e := env[name]; e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: %+v, want it from a Secret (secretKeyRef)", name, e)
		}
	}
	if got := env["WEBHOOK_CONSOLE_HOSTS"].Value; got != "fluxora-fluxora-webhook-worker-console,fluxora-fluxora-webhook-worker-console.hooks,fluxora-fluxora-webhook-worker-console.hooks.svc,console.example.com" {
		t.Errorf("WEBHOOK_CONSOLE_HOSTS %q", got)
	}
}

// A config key the worker does not read (a misspelling) is refused by the
// values schema rather than passed on unnoticed.
func TestChartRefusesUnknownSetting(t *testing.T) {
	t.Parallel()
	_, err := render(map[string]any{"config": map[string]any{"WEBHOOK_BATCHSIZE": "5"}})
	if err == nil || !strings.Contains(err.Error(), "WEBHOOK_BATCHSIZE") {
		t.Fatalf("render with config.WEBHOOK_BATCHSIZE: %v, want a refusal naming it", err)
	}
}

// checkWorker checks the worker Deployment and the migration hook: probes,
// security, the grace period against the shutdown timeout, secrets as
// files with mode 0400.
func checkWorker(t *testing.T, r rendered, port int32, shutdownMS int64) {
	t.Helper()
	d := r.deployments["worker"]
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != port {
		t.Errorf("ports %+v, want metrics on %d", c.Ports, port)
	}
	if got := envValue(c.Env, "WEBHOOK_METRICS_ADDR"); got != ":"+strconv.Itoa(int(port)) {
		t.Errorf("WEBHOOK_METRICS_ADDR %q, want :%d", got, port)
	}
	for probe, path := range map[*corev1.Probe]string{c.ReadinessProbe: "/readyz", c.LivenessProbe: "/healthz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe %+v, want GET %s on port metrics", probe, path)
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g*1000 <= shutdownMS {
		t.Errorf("terminationGracePeriodSeconds %s, want more than the shutdown timeout %d ms", show("%d", g), shutdownMS)
	}
	checkPod(t, "worker", pod)
	if len(r.jobs) != 1 {
		t.Fatalf("jobs %d, want the migration hook", len(r.jobs))
	}
	j := r.jobs[0]
	if got := j.Annotations["helm.sh/hook"]; got != "pre-install,pre-upgrade" {
		t.Errorf("migrate job hook %q, want pre-install,pre-upgrade", got)
	}
	if args := j.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args, []string{"migrate"}) {
		t.Errorf("migrate job args %q", args)
	}
	if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("migrate job restartPolicy %q", j.Spec.Template.Spec.RestartPolicy)
	}
	checkPod(t, "migrate", j.Spec.Template.Spec)
}

func checkConsole(t *testing.T, r rendered) {
	t.Helper()
	pod := r.deployments["console"].Spec.Template.Spec
	c := pod.Containers[0]
	if !slices.Equal(c.Args, []string{"console"}) || envValue(c.Env, "WEBHOOK_CONSOLE_ADDR") != "0.0.0.0:8089" {
		t.Errorf("console args %q, WEBHOOK_CONSOLE_ADDR %q", c.Args, envValue(c.Env, "WEBHOOK_CONSOLE_ADDR"))
	}
	checkPod(t, "console", pod)
	var found bool
	for _, s := range r.services {
		if s.Name == "fluxora-fluxora-webhook-worker-console" && s.Spec.Ports[0].TargetPort.String() == "console" {
			found = true
		}
	}
	if !found {
		t.Error("no console Service")
	}
}

// checkPod checks what every pod of the chart must be: non-root, read-only,
// no capabilities, no token, and every file of a Secret mode 0400 at most,
// every mounted file named by the variable that reads it.
func checkPod(t *testing.T, name string, pod corev1.PodSpec) {
	t.Helper()
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken not false", name)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: container securityContext %+v", name, sc)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: resources %+v, want memory requests and limits", name, c.Resources)
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name == "") {
				t.Errorf("%s: %s from %+v, want a named Secret", name, e.Name, e.ValueFrom)
			}
		}
	}
	for _, v := range pod.Volumes {
		if s := v.Secret; s != nil && (s.DefaultMode == nil || *s.DefaultMode != 0o400) {
			t.Errorf("%s: volume %s of Secret %s has defaultMode %s, want 0400", name, v.Name, s.SecretName, show("%#o", s.DefaultMode))
		}
	}
}

// show prints what p points to, or nil.
func show[T any](format string, p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf(format, *p)
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// documentedVars are the WEBHOOK_* variables docs/configuration.md names.
func documentedVars(t *testing.T) []string {
	t.Helper()
	text, err := os.ReadFile(configDocs)
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("`(WEBHOOK_[A-Z_]+)`").FindAllStringSubmatch(string(text), -1)
	var out []string
	for _, m := range names {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	if len(out) < 30 {
		t.Fatalf("only %d WEBHOOK_ variables found in %s", len(out), configDocs)
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

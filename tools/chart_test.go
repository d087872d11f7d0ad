package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir   = "../deploy/helm/fluxora-webhook-worker"
	configDocs = "../docs/configuration.md"
)

// secretVars are the variables whose values may hold a credential: the
// chart must take each from a Secret (secretKeyRef), never from a value.
var secretVars = []string{"DATABASE_URL", "WEBHOOK_LISTEN_DATABASE_URL", "REDIS_URL",
	"WEBHOOK_SECRET", "WEBHOOK_SECRET_PREVIOUS", "WEBHOOK_EGRESS_PROXY"}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart writes; a field outside it fails the strict decoding.
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// rendered is what `helm template` makes of the chart, each object decoded
// into its type.
type rendered struct {
	deployments map[string]*appsv1.Deployment
	jobs        []*batchv1.Job
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	monitors    []*serviceMonitor
	appVersion  string
}

// allOn turns on every option of the chart and sets every setting.
func allOn() map[string]any {
	config := map[string]any{}
	for _, name := range configKeys() {
		config[name] = "1"
	}
	config["WEBHOOK_SHUTDOWN_TIMEOUT_MS"] = 60500
	return map[string]any{
		"image":          map[string]any{"tag": "9.9.9", "pullPolicy": "Always"},
		"replicaCount":   3,
		"database":       map[string]any{"secretName": "db", "key": "url"},
		"listenDatabase": map[string]any{"secretName": "db", "key": "listen-url"},
		"redis":          map[string]any{"secretName": "redis", "key": "url"},
		"defaultEndpoint": map[string]any{"url": "https://consumer.example/hooks", "secretName": "hook",
			"key": "secret", "previousKey": "previous", "previousUntil": "2026-12-05T09:00:00Z"},
		"egressProxy":        map[string]any{"secretName": "proxy", "key": "url"},
		"secretsKey":         map[string]any{"secretName": "keys", "key": "secrets.keys"},
		"caBundle":           map[string]any{"configMapName": "partner-ca", "key": "ca.crt"},
		"metrics":            map[string]any{"port": 9500},
		"config":             config,
		"imagePullSecrets":   []any{map[string]any{"name": "registry"}},
		"serviceAccountName": "fluxora",
		"podAnnotations":     map[string]any{"a": "b"},
		"podLabels":          map[string]any{"team": "payments"},
		"nodeSelector":       map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":        []any{map[string]any{"key": "k", "operator": "Exists", "effect": "NoSchedule"}},
		"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
			"whenUnsatisfiable": "ScheduleAnyway", "labelSelector": map[string]any{"matchLabels": map[string]any{"x": "y"}}}},
		"console": map[string]any{"enabled": true, "tokenSecret": map[string]any{"secretName": "console", "key": "token"},
			"hosts": []any{"console.example.com"}, "secureCookie": true, "tls": map[string]any{"secretName": "console-tls"}},
		"serviceMonitor": map[string]any{"enabled": true, "scrapeTimeout": "10s", "labels": map[string]any{"release": "prom"}},
	}
}

// configKeys are the keys of values.yaml's config.
func configKeys() []string {
	text, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		panic(err)
	}
	var v struct {
		Config map[string]any `json:"config"`
	}
	if err := yaml.Unmarshal(text, &v); err != nil {
		panic(err)
	}
	var keys []string
	for k := range v.Config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// lint is `helm lint --strict` with vals.
func lint(t *testing.T, vals map[string]any) {
	t.Helper()
	l := action.NewLint()
	l.Strict = true
	l.Namespace = "hooks"
	res := l.Run([]string{chartDir}, vals)
	for _, m := range res.Messages {
		t.Logf("lint: %s", m)
	}
	if len(res.Errors) > 0 || res.TotalChartsLinted != 1 {
		t.Fatalf("helm lint: %d charts linted, errors %v", res.TotalChartsLinted, res.Errors)
	}
}

// render is `helm template` with vals: the manifest and the hooks.
func render(vals map[string]any) (string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("load chart: %w", err)
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true
	inst.ReleaseName = "fluxora"
	inst.Namespace = "hooks"
	r, err := inst.Run(ch, vals)
	if err != nil {
		return "", err
	}
	rel, ok := r.(*releasev1.Release)
	if !ok {
		return "", fmt.Errorf("release of type %T", r)
	}
	var out strings.Builder
	out.WriteString(rel.Manifest)
	for _, h := range rel.Hooks {
		fmt.Fprintf(&out, "\n---\n%s\n", h.Manifest)
	}
	return out.String(), nil
}

var docSplit = regexp.MustCompile(`(?m)^---\s*$`)

// decodeAll renders vals and decodes every object strictly into its type.
func decodeAll(t *testing.T, vals map[string]any) rendered {
	t.Helper()
	manifest, err := render(vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{deployments: map[string]*appsv1.Deployment{}, appVersion: ch.(*chartv2.Chart).Metadata.AppVersion}
	for _, doc := range docSplit.Split(manifest, -1) {
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			t.Fatalf("yaml: %v\n%s", err, doc)
		}
		if string(js) == "null" {
			continue
		}
		var meta struct{ APIVersion, Kind string }
		if err := json.Unmarshal(js, &meta); err != nil {
			t.Fatal(err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 Deployment":
			d := new(appsv1.Deployment)
			obj = d
			defer func() { r.deployments[d.Spec.Template.Spec.Containers[0].Name] = d }()
		case "batch/v1 Job":
			j := new(batchv1.Job)
			obj, r.jobs = j, append(r.jobs, j)
		case "v1 Service":
			s := new(corev1.Service)
			obj, r.services = s, append(r.services, s)
		case "policy/v1 PodDisruptionBudget":
			p := new(policyv1.PodDisruptionBudget)
			obj, r.pdbs = p, append(r.pdbs, p)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			m := new(serviceMonitor)
			obj, r.monitors = m, append(r.monitors, m)
		default:
			t.Fatalf("unexpected object %s %s:\n%s", meta.APIVersion, meta.Kind, doc)
		}
		if err := strictJSON(js, obj); err != nil {
			t.Fatalf("%s: %v\n%s", meta.Kind, err, doc)
		}
	}
	return r
}

// strictJSON decodes js into obj, refusing any field obj's type lacks.
func strictJSON(js []byte, obj any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(obj)
}

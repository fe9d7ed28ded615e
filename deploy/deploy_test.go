// Package deploy_test checks the deployment files without helm or a
// container builder (make chart-check and make image-check run those):
// the chart's Chart.yaml and values.yaml parse, every value a template
// reads is defined, the chart keeps its promises (replicas, disruption
// budget, probes, hook, secrets, non-root read-only pods), and the
// Dockerfile and compose.yaml say what the README says.
package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const chart = "helm/reconciler"

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &v), path)
	return v
}

// lookup walks a dotted path through nested maps.
func lookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// templates returns the chart's template files by name.
func templates(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(chart, "templates", "*"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		out[filepath.Base(p)] = string(raw)
	}
	require.NotEmpty(t, out)
	return out
}

func TestChartValuesDefined(t *testing.T) {
	t.Parallel()
	meta := readYAML(t, filepath.Join(chart, "Chart.yaml"))
	require.Equal(t, "v2", meta["apiVersion"])
	require.Equal(t, "reconciler", meta["name"])
	require.Regexp(t, `^\d+\.\d+\.\d+$`, meta["version"])
	require.NotEmpty(t, meta["appVersion"])

	values := readYAML(t, filepath.Join(chart, "values.yaml"))
	ref := regexp.MustCompile(`\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)`)
	used := 0
	for name, text := range templates(t) {
		for _, m := range ref.FindAllStringSubmatch(text, -1) {
			path := strings.TrimPrefix(m[1], ".")
			_, ok := lookup(values, path)
			require.True(t, ok, "%s reads .Values.%s, which values.yaml does not define", name, path)
			used++
		}
	}
	require.Greater(t, used, 10)
}

func TestChartPromises(t *testing.T) {
	t.Parallel()
	values := readYAML(t, filepath.Join(chart, "values.yaml"))
	replicas, _ := lookup(values, "replicaCount")
	require.GreaterOrEqual(t, replicas, 2, "at least two serve processes")
	for path, want := range map[string]any{
		"podSecurityContext.runAsNonRoot":          true,
		"securityContext.readOnlyRootFilesystem":   true,
		"securityContext.allowPrivilegeEscalation": false,
		"serviceMonitor.enabled":                   false,
		"migration.enabled":                        true,
	} {
		got, ok := lookup(values, path)
		require.True(t, ok, path)
		require.Equal(t, want, got, path)
	}
	uid, _ := lookup(values, "podSecurityContext.runAsUser")
	require.NotZero(t, uid)

	tpl := templates(t)
	all := strings.Join(func() []string {
		var s []string
		for _, v := range tpl {
			s = append(s, v)
		}
		return s
	}(), "\n")
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "Job", "ServiceMonitor"} {
		require.Contains(t, all, "kind: "+kind)
	}
	dep := tpl["deployment.yaml"]
	require.Contains(t, dep, "path: /healthz")
	require.Contains(t, dep, "path: /readyz")
	require.Contains(t, dep, `"--migrate=false"`, "the hook migrates; serve does not")
	require.Contains(t, tpl["migrate-job.yaml"], `"helm.sh/hook": pre-install,pre-upgrade`)
	require.Contains(t, tpl["migrate-job.yaml"], `args: ["migrate", "up"]`)
	require.True(t, strings.HasPrefix(tpl["servicemonitor.yaml"], "{{- if .Values.serviceMonitor.enabled }}"))
	require.Contains(t, tpl["_helpers.tpl"], "secretKeyRef", "the DSN and the tokens come from Secrets")
	require.NotContains(t, all, "kind: Secret", "the chart stores no secret of its own")
	// In-cluster credentials only when a Kubernetes part is enabled, in one
	// namespace (make chart-check renders both ways).
	require.True(t, strings.HasPrefix(tpl["rbac.yaml"], `{{- if include "reconciler.kubeAccess" . }}`))
	require.NotContains(t, all, "ClusterRole", "namespaced permissions only")
	require.Contains(t, tpl["migrate-job.yaml"], "automountServiceAccountToken: false", "the migration never gets a token")
	for _, path := range []string{"kubernetes.runtime.enabled", "kubernetes.jobAgent.enabled"} {
		v, ok := lookup(values, path)
		require.True(t, ok, path)
		require.Equal(t, false, v, "%s is off by default", path)
	}
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	df := string(raw)
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "ENV RECONCILER_LISTEN=0.0.0.0:8080", "EXPOSE 8080", "HEALTHCHECK"} {
		require.Contains(t, df, want)
	}
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(df, -1)
	require.GreaterOrEqual(t, len(froms), 2, "multi-stage")
	require.Regexp(t, `^(gcr\.io/distroless/static\S*|scratch)$`, froms[len(froms)-1][1])
	user := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(df)
	require.NotNil(t, user)
	require.NotRegexp(t, `^(0|root)(:|$)`, user[1], "non-root")
	// The version the image links in is a variable the binary has.
	x := regexp.MustCompile(`-X main\.([A-Za-z]+)=`).FindStringSubmatch(df)
	require.NotNil(t, x)
	about, err := os.ReadFile("../cmd/reconciler/about.go")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^var `+x[1]+` string$`, string(about))
}

func TestCompose(t *testing.T) {
	t.Parallel()
	c := readYAML(t, "../compose.yaml")
	services, ok := c["services"].(map[string]any)
	require.True(t, ok)
	svc := func(name string) map[string]any {
		s, ok := services[name].(map[string]any)
		require.True(t, ok, "service %s", name)
		return s
	}
	require.Contains(t, svc("postgres"), "healthcheck")
	require.Equal(t, []any{"migrate", "up"}, svc("migrate")["command"])
	require.Equal(t, map[string]any{"postgres": map[string]any{"condition": "service_healthy"}}, svc("migrate")["depends_on"])
	serve := svc("reconciler")
	require.Equal(t, []any{"serve", "--migrate=false"}, serve["command"])
	require.Equal(t, map[string]any{"migrate": map[string]any{"condition": "service_completed_successfully"}}, serve["depends_on"])
	require.Contains(t, serve, "healthcheck")
	require.Equal(t, []any{"127.0.0.1:8080:8080"}, serve["ports"], "published on loopback only")
}

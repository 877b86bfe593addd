package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// components/otlp: an opt-in Kustomize component that points every Realm
// service at an OpenTelemetry collector and lets it reach the collector's
// namespace. The overlays that list it are named here; in every other
// overlay nothing may change (no OTEL_* variable, no edge to the collector).
var tracedOverlays = map[string]bool{
	"prod-otlp": true,
	"dev-otlp":  true, // rendered by renderWithOTLP from dev plus the component
}

// The collector the component names: a namespace the policy admits, and the
// OTLP ports (4317 gRPC, 4318 HTTP).
const (
	otlpNamespace = "observability"
	otlpGRPCPort  = "4317"
	otlpHTTPPort  = "4318"
)

// tracedWorkloads are the workloads that export traces: the services and
// every runner (not the dev Redis).
func tracedWorkloads(r *rendered) []workload {
	var out []workload
	for _, w := range r.workloads() {
		if slices.Contains(frontServices, w.name) || w.template.Labels["app.kubernetes.io/component"] == "runner" {
			out = append(out, w)
		}
	}
	return out
}

// otlpEdges is what the component adds to the call graph: every traced
// workload -> the collector's namespace on 4317 and 4318.
func otlpEdges(r *rendered) []netEdge {
	if !tracedOverlays[r.overlay] {
		return nil
	}
	var out []netEdge
	for _, w := range tracedWorkloads(r) {
		for _, port := range []string{otlpGRPCPort, otlpHTTPPort} {
			out = append(out, netEdge{"egress", w.name, peerObservability, port + "/TCP"})
		}
	}
	return out
}

// renderWithOTLP renders dev plus components/otlp from a kustomization in a
// temp dir named dev-otlp: the component over an overlay that runs a Redis.
func renderWithOTLP(t *testing.T) *rendered {
	t.Helper()
	return renderWithComponent(t, "dev-otlp", "dev", "realm-dev", "")
}

// renderWithComponent renders overlay plus components/otlp (plus extra
// kustomization fields) from a temp dir called name. kustomize refuses
// absolute roots, so they are named relative to the temp dir.
func renderWithComponent(t *testing.T, name, overlay, namespace, extra string) *rendered {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rel := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := filepath.Rel(dir, a)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(r)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
  - %s
components:
  - %s
%s`, namespace, rel(filepath.Join("k8s", "overlays", overlay)), rel(filepath.Join("k8s", "components", "otlp")), extra)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return render(t, dir)
}

// TestOTLPDocsRecipeRetargetsTheCollector applies docs/deploy.md's patches
// (another collector, gRPC, another namespace) next to the component, as
// the docs say, and checks every service follows.
func TestOTLPDocsRecipeRetargetsTheCollector(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The fenced block that patches realm-otlp-egress, dedented.
	var recipe string
	for i, block := range strings.Split(string(doc), "```") {
		if i%2 == 1 && strings.Contains(block, "name: realm-otlp-egress}") {
			block = strings.TrimPrefix(block, "yaml")
			lines := strings.Split(strings.Trim(block, "\n"), "\n")
			indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
			for _, l := range lines {
				recipe += strings.TrimPrefix(l, strings.Repeat(" ", indent)) + "\n"
			}
		}
	}
	if recipe == "" {
		t.Fatal("docs/deploy.md has no code block patching realm-otlp-egress")
	}
	r := renderWithComponent(t, "prod-otlp", "prod", "realm", recipe)
	for _, w := range tracedWorkloads(r) {
		for _, c := range w.template.Spec.Containers {
			where := fmt.Sprintf("%s %s container %s", w.kind, w.name, c.Name)
			env := containerEnv(t, r, where, c)
			if got := env["OTEL_EXPORTER_OTLP_ENDPOINT"]; got != "http://my-collector.tracing.svc:4317" {
				t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %q, want the docs' collector", where, got)
			}
			if got := env["OTEL_EXPORTER_OTLP_PROTOCOL"]; got != "grpc" {
				t.Errorf("%s: OTEL_EXPORTER_OTLP_PROTOCOL = %q, want grpc", where, got)
			}
		}
	}
	var peers []string
	for _, e := range allowedEdges(t, r) {
		if e.dir == "egress" && (e.port == otlpGRPCPort+"/TCP" || e.port == otlpHTTPPort+"/TCP") {
			peers = append(peers, e.peer)
		}
	}
	if len(peers) == 0 || slices.ContainsFunc(peers, func(p string) bool { return p != "ns:tracing" }) {
		t.Errorf("OTLP egress goes to %v, want only ns:tracing", peers)
	}
}

// checkOTLPEnv: in a traced overlay every container of a traced workload
// gets OTEL_EXPORTER_OTLP_ENDPOINT (a URL on the collector's namespace and
// the port of its protocol) and OTEL_SERVICE_NAME=<workload>; no other
// container, and no container of another overlay, gets any OTEL_* variable.
// It returns what is wrong.
func checkOTLPEnv(t *testing.T, r *rendered) []string {
	t.Helper()
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	traced := map[string]bool{}
	if tracedOverlays[r.overlay] {
		for _, w := range tracedWorkloads(r) {
			traced[w.name] = true
		}
		if len(traced) == 0 {
			errorf("no traced workload")
		}
	}
	for _, w := range r.workloads() {
		for _, c := range w.template.Spec.Containers {
			where := fmt.Sprintf("%s %s container %s", w.kind, w.name, c.Name)
			env := containerEnv(t, r, where, c)
			if !traced[w.name] {
				for k := range env {
					if strings.HasPrefix(k, "OTEL_") {
						errorf("%s: %s is set, but this overlay does not list components/otlp", where, k)
					}
				}
				continue
			}
			endpoint, ok := env["OTEL_EXPORTER_OTLP_ENDPOINT"]
			if !ok {
				errorf("%s: no OTEL_EXPORTER_OTLP_ENDPOINT", where)
				continue
			}
			if got := env["OTEL_SERVICE_NAME"]; got != w.name {
				errorf("%s: OTEL_SERVICE_NAME = %q, want %q", where, got, w.name)
			}
			u, err := url.Parse(endpoint)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %q, want an http(s) URL", where, endpoint)
				continue
			}
			want := otlpHTTPPort
			if env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc" {
				want = otlpGRPCPort
			}
			if u.Port() != want {
				errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %q: protocol %q wants port %s", where, endpoint, env["OTEL_EXPORTER_OTLP_PROTOCOL"], want)
			}
			// <service>.<namespace>[.svc...]: the namespace the policy admits.
			if labels := strings.Split(u.Hostname(), "."); len(labels) < 2 || labels[1] != otlpNamespace || net.ParseIP(u.Hostname()) != nil {
				errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %q names no Service of the namespace %s", where, endpoint, otlpNamespace)
			}
		}
	}
	return problems
}

func TestOTLPOnlyWhereTheComponentIsListed(t *testing.T) {
	t.Parallel()
	report := func(t *testing.T, r *rendered) {
		for _, p := range checkOTLPEnv(t, r) {
			t.Error(p)
		}
	}
	forEachOverlay(t, report)
	t.Run("dev-otlp", func(t *testing.T) {
		t.Parallel()
		r := renderWithOTLP(t)
		report(t, r)
		// The whole call graph, as for the overlays.
		extra, missing := diffEdges(allowedEdges(t, r), intendedEdges(r))
		for _, e := range extra {
			t.Errorf("allowed but not in the call graph: %s", e)
		}
		for _, e := range missing {
			t.Errorf("in the call graph but not allowed: %s", e)
		}
	})
	for o := range tracedOverlays {
		if o == "dev-otlp" {
			continue
		}
		if _, err := os.Stat(filepath.Join("k8s", "overlays", o)); err != nil {
			t.Errorf("traced overlay %s: %v", o, err)
		}
	}
}

// TestOTLPComponentAddsExactlyTheCollectorEdges renders an overlay with and
// without the component: the allowed edges differ by exactly every traced
// workload -> observability 4317, 4318/TCP, nothing removed; and the
// objects are the same but for the ConfigMaps, the Deployments that read
// them, and the one new NetworkPolicy.
func TestOTLPComponentAddsExactlyTheCollectorEdges(t *testing.T) {
	t.Parallel()
	pairs := []struct {
		name        string
		plain, otlp func(t *testing.T) *rendered
	}{
		{"dev", func(t *testing.T) *rendered { return render(t, filepath.Join("k8s", "overlays", "dev")) }, renderWithOTLP},
		{"prod", func(t *testing.T) *rendered { return render(t, filepath.Join("k8s", "overlays", "prod")) },
			func(t *testing.T) *rendered { return render(t, filepath.Join("k8s", "overlays", "prod-otlp")) }},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			plain, otlp := p.plain(t), p.otlp(t)
			if plain.namespace != otlp.namespace {
				t.Errorf("namespace %q with the component, %q without", otlp.namespace, plain.namespace)
			}
			if got := otlpEdges(plain); len(got) != 0 {
				t.Fatalf("%s is listed in tracedOverlays", plain.overlay)
			}
			gained, lost := diffEdges(allowedEdges(t, otlp), allowedEdges(t, plain))
			want := otlpEdges(otlp)
			if len(want) == 0 {
				t.Fatalf("%s is not listed in tracedOverlays", otlp.overlay)
			}
			wantNames := make([]string, len(want))
			for i, e := range want {
				wantNames[i] = e.String()
			}
			slices.Sort(wantNames)
			if !slices.Equal(gained, wantNames) {
				t.Errorf("the component adds edges %v, want exactly %v", gained, wantNames)
			}
			if len(lost) > 0 {
				t.Errorf("the component removes edges %v", lost)
			}
			// Nothing else moves.
			if !slices.Equal(sortedKeys(plain.deployments), sortedKeys(otlp.deployments)) ||
				!slices.Equal(sortedKeys(plain.statefulSets), sortedKeys(otlp.statefulSets)) ||
				!slices.Equal(sortedKeys(plain.services), sortedKeys(otlp.services)) ||
				!slices.Equal(sortedKeys(plain.secrets), sortedKeys(otlp.secrets)) ||
				!slices.Equal(sortedKeys(plain.ingresses), sortedKeys(otlp.ingresses)) ||
				!slices.Equal(sortedKeys(plain.hpas), sortedKeys(otlp.hpas)) ||
				!slices.Equal(sortedKeys(plain.pdbs), sortedKeys(otlp.pdbs)) {
				t.Error("the component adds or removes workloads, Services, Secrets, Ingresses, HPAs or PDBs")
			}
			var added []string
			for name := range otlp.policies {
				if plain.policies[name] == nil {
					added = append(added, name)
				}
			}
			for name := range plain.policies {
				if otlp.policies[name] == nil {
					t.Errorf("the component removes NetworkPolicy %s", name)
				}
			}
			if len(added) != 1 {
				t.Errorf("the component adds NetworkPolicies %v, want one", added)
			}
			// Every object the overlay renders already is the same; a
			// Deployment but for its ConfigMaps' hashed names and the
			// envFrom of realm-otlp.
			same := func(kind string, a, b any) {
				if !equalJSON(t, a, b) {
					t.Errorf("%s changes with the component", kind)
				}
			}
			for name := range plain.policies {
				same("NetworkPolicy "+name, plain.policies[name], otlp.policies[name])
			}
			for name := range plain.statefulSets {
				same("StatefulSet "+name, plain.statefulSets[name], otlp.statefulSets[name])
			}
			for name := range plain.services {
				same("Service "+name, plain.services[name], otlp.services[name])
			}
			for name := range plain.secrets {
				same("Secret "+name, plain.secrets[name], otlp.secrets[name])
			}
			for name := range plain.ingresses {
				same("Ingress "+name, plain.ingresses[name], otlp.ingresses[name])
			}
			for name := range plain.hpas {
				same("HorizontalPodAutoscaler "+name, plain.hpas[name], otlp.hpas[name])
			}
			for name := range plain.pdbs {
				same("PodDisruptionBudget "+name, plain.pdbs[name], otlp.pdbs[name])
			}
			for name, d := range otlp.deployments {
				if plain.deployments[name] == nil {
					continue
				}
				d = d.DeepCopy()
				for i := range d.Spec.Template.Spec.Containers {
					c := &d.Spec.Template.Spec.Containers[i]
					c.EnvFrom = slices.DeleteFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
						return e.ConfigMapRef != nil && otlp.configMaps[e.ConfigMapRef.Name] != nil &&
							strings.HasPrefix(e.ConfigMapRef.Name, "realm-otlp-")
					})
					plainC := plain.deployments[name].Spec.Template.Spec.Containers
					if i >= len(plainC) || len(plainC[i].EnvFrom) != len(c.EnvFrom) {
						continue // the comparison below reports it
					}
					for j, e := range c.EnvFrom {
						if e.ConfigMapRef != nil && plainC[i].EnvFrom[j].ConfigMapRef != nil {
							c.EnvFrom[j].ConfigMapRef.Name = plainC[i].EnvFrom[j].ConfigMapRef.Name
						}
					}
				}
				same("Deployment "+name, plain.deployments[name], d)
			}
			// A ConfigMap (by its name before the hash) gains OTEL_SERVICE_NAME
			// only; realm-otlp is new.
			unhashed := func(n string) string { return n[:max(strings.LastIndex(n, "-"), 0)] }
			otlpCMs := map[string]*corev1.ConfigMap{}
			for n, cm := range otlp.configMaps {
				otlpCMs[unhashed(n)] = cm
			}
			for n, cm := range plain.configMaps {
				got := otlpCMs[unhashed(n)]
				if got == nil {
					t.Errorf("ConfigMap %s is gone with the component", n)
					continue
				}
				data := maps.Clone(got.Data)
				delete(data, "OTEL_SERVICE_NAME")
				if !maps.Equal(data, cm.Data) {
					t.Errorf("ConfigMap %s: data %v with the component, %v without (want only OTEL_SERVICE_NAME added)", n, got.Data, cm.Data)
				}
			}
			if len(otlpCMs) != len(plain.configMaps)+1 || otlpCMs["realm-otlp"] == nil {
				t.Errorf("ConfigMaps %v with the component, %v without: want realm-otlp added", sortedKeys(otlp.configMaps), sortedKeys(plain.configMaps))
			}
		})
	}
}

// TestOTLPModelCatchesChanges breaks the component's policy in memory and
// checks the call-graph comparison notices.
func TestOTLPModelCatchesChanges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(r *rendered)
		want   string
	}{
		{"gRPC port dropped", func(r *rendered) {
			p := r.policies["realm-otlp-egress"]
			p.Spec.Egress[0].Ports = p.Spec.Egress[0].Ports[1:]
		}, "engine-svc -> ns:observability 4317/TCP"},
		{"any port", func(r *rendered) {
			r.policies["realm-otlp-egress"].Spec.Egress[0].Ports = nil
		}, "mcp-svc -> ns:observability *"},
		{"the dev Redis selected too", func(r *rendered) {
			r.policies["realm-otlp-egress"].Spec.PodSelector.MatchExpressions = nil
		}, "redis -> ns:observability 4318/TCP"},
		{"runners left out", func(r *rendered) {
			sel := r.policies["realm-otlp-egress"].Spec.PodSelector.MatchExpressions
			sel[0].Values = slices.DeleteFunc(slices.Clone(sel[0].Values), func(v string) bool { return v == "runner" })
		}, "runner-examples -> ns:observability 4318/TCP"},
		{"another namespace", func(r *rendered) {
			r.policies["realm-otlp-egress"].Spec.Egress[0].To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] = "monitoring"
		}, "agent-svc -> ns:monitoring 4317/TCP"},
		{"policy gone", func(r *rendered) {
			delete(r.policies, "realm-otlp-egress")
		}, "listen-svc -> ns:observability 4317/TCP"},
		{"no longer a traced overlay", func(r *rendered) {
			r.overlay = "dev"
		}, "engine-svc -> ns:observability 4318/TCP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := renderWithOTLP(t)
			if extra, missing := diffEdges(allowedEdges(t, r), intendedEdges(r)); len(extra)+len(missing) > 0 {
				t.Fatalf("the rendered policies already differ: extra %v, missing %v", extra, missing)
			}
			tc.mutate(r)
			extra, missing := diffEdges(allowedEdges(t, r), intendedEdges(r))
			if !slices.Contains(extra, tc.want) && !slices.Contains(missing, tc.want) {
				t.Errorf("the change went unnoticed: want %q among extra %v or missing %v", tc.want, extra, missing)
			}
		})
	}
}

// TestOTLPEnvCheckCatchesChanges breaks the rendered environment in memory
// and checks checkOTLPEnv notices.
func TestOTLPEnvCheckCatchesChanges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(r *rendered)
	}{
		{"a runner without the endpoint", func(r *rendered) {
			c := &r.deployments["runner-examples"].Spec.Template.Spec.Containers[0]
			c.EnvFrom = slices.DeleteFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
				return e.ConfigMapRef != nil && strings.HasPrefix(e.ConfigMapRef.Name, "realm-otlp")
			})
		}},
		{"gRPC protocol on the HTTP port", func(r *rendered) {
			for name, cm := range r.configMaps {
				if strings.HasPrefix(name, "realm-otlp") {
					cm.Data["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
				}
			}
		}},
		{"a service named after another", func(r *rendered) {
			for name, cm := range r.configMaps {
				if strings.HasPrefix(name, "agent-svc") {
					cm.Data["OTEL_SERVICE_NAME"] = "engine-svc"
				}
			}
		}},
		{"a collector in another namespace", func(r *rendered) {
			for name, cm := range r.configMaps {
				if strings.HasPrefix(name, "realm-otlp") {
					cm.Data["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://otel-collector.monitoring.svc:4318"
				}
			}
		}},
		{"the endpoint outside a traced overlay", func(r *rendered) {
			r.overlay = "dev"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := renderWithOTLP(t)
			if problems := checkOTLPEnv(t, r); len(problems) > 0 {
				t.Fatalf("the rendered environment is already wrong: %v", problems)
			}
			tc.mutate(r)
			if problems := checkOTLPEnv(t, r); len(problems) == 0 {
				t.Error("the change went unnoticed")
			}
		})
	}
}

// equalJSON compares two values by their JSON encoding.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

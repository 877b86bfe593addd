package deploy

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// operatorSecrets are the Secrets an overlay expects the operator to create
// (docs/deploy.md says how); any other Secret a pod needs must be rendered.
var operatorSecrets = map[string][]string{
	"dev":       {"realm-mcp-tls"},
	"prod":      {"realm-redis", "realm-mcp-token", "realm-mcp-tls"},
	"prod-otlp": {"realm-redis", "realm-mcp-token", "realm-mcp-tls"},
	// components/notify's manifest and Slack secrets (docs/deploy.md, Notifications).
	"prod-notify": {"realm-redis", "realm-mcp-token", "realm-mcp-tls", "notify-svc-manifest", "realm-slack-events-tls"},
	"dev-otlp":    {"realm-mcp-tls"}, // otlp_test.go's dev plus the component
}

// frontServices are the services every overlay runs, each with a
// Deployment, a Service and a ConfigMap of its own.
var frontServices = []string{"engine-svc", "mcp-svc", "agent-svc", "listen-svc", "console-svc"}

// forEachOverlay renders every overlay once and runs check on it.
func forEachOverlay(t *testing.T, check func(t *testing.T, r *rendered)) {
	t.Helper()
	for _, o := range overlays(t) {
		t.Run(o, func(t *testing.T) {
			t.Parallel()
			check(t, render(t, filepath.Join("k8s", "overlays", o)))
		})
	}
}

func selectorMatches(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

// containerPort resolves a port (number or name) against a container's ports.
func containerPort(c corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) || (p.Type == intstr.String && cp.Name == p.StrVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func TestEveryContainerIsProbedLimitedAndUnprivileged(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		for _, w := range r.workloads() {
			pod := w.template.Spec
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("%s %s: automountServiceAccountToken is not false (no pod talks to the API server)", w.kind, w.name)
			}
			for _, c := range pod.Containers {
				where := fmt.Sprintf("%s %s container %s", w.kind, w.name, c.Name)
				for kind, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
					if probe == nil {
						t.Errorf("%s: no %s probe", where, kind)
						continue
					}
					var port intstr.IntOrString
					switch h := probe.ProbeHandler; {
					case h.GRPC != nil:
						port = intstr.FromInt32(h.GRPC.Port)
					case h.HTTPGet != nil:
						port = h.HTTPGet.Port
					case h.TCPSocket != nil:
						port = h.TCPSocket.Port
					case h.Exec != nil:
						continue
					default:
						t.Errorf("%s: %s probe has no handler", where, kind)
						continue
					}
					if _, ok := containerPort(c, port); !ok {
						t.Errorf("%s: %s probe port %s is not a port of the container", where, kind, port.String())
					}
				}
				for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					if _, ok := c.Resources.Limits[res]; !ok {
						t.Errorf("%s: no %s limit", where, res)
					}
					if _, ok := c.Resources.Requests[res]; !ok {
						t.Errorf("%s: no %s request", where, res)
					}
					if req, lim := c.Resources.Requests[res], c.Resources.Limits[res]; req.Cmp(lim) > 0 {
						t.Errorf("%s: %s request %s above its limit %s", where, res, req.String(), lim.String())
					}
				}
				sc := c.SecurityContext
				if sc == nil {
					t.Errorf("%s: no securityContext", where)
					continue
				}
				nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) ||
					(pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot)
				if !nonRoot {
					t.Errorf("%s: runAsNonRoot is not true", where)
				}
				if uid := sc.RunAsUser; uid != nil && *uid == 0 {
					t.Errorf("%s: runs as uid 0", where)
				}
				if pod.SecurityContext != nil && pod.SecurityContext.RunAsUser != nil && *pod.SecurityContext.RunAsUser == 0 {
					t.Errorf("%s: pod runs as uid 0", where)
				}
				if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
					t.Errorf("%s: readOnlyRootFilesystem is not true", where)
				}
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("%s: allowPrivilegeEscalation is not false", where)
				}
				if sc.Privileged != nil && *sc.Privileged {
					t.Errorf("%s: privileged", where)
				}
				if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
					t.Errorf("%s: capabilities are not drop [ALL] with none added", where)
				}
			}
		}
	})
}

func TestEveryServiceSelectsPodsThatExist(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		for _, name := range sortedKeys(r.services) {
			svc := r.services[name]
			if len(svc.Spec.Selector) == 0 {
				t.Errorf("Service %s: no selector", name)
				continue
			}
			var matched []workload
			for _, w := range r.workloads() {
				if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.template.Labels)) {
					matched = append(matched, w)
				}
			}
			if len(matched) == 0 {
				t.Errorf("Service %s: selector %v matches no pods", name, svc.Spec.Selector)
			}
			for _, w := range matched {
				for _, sp := range svc.Spec.Ports {
					target := sp.TargetPort
					if target.Type == intstr.Int && target.IntVal == 0 {
						target = intstr.FromInt32(sp.Port)
					}
					found := false
					for _, c := range w.template.Spec.Containers {
						if _, ok := containerPort(c, target); ok {
							found = true
						}
					}
					if !found {
						t.Errorf("Service %s port %d: target %s is no port of %s %s", name, sp.Port, target.String(), w.kind, w.name)
					}
				}
			}
		}
		for _, svc := range frontServices {
			if r.deployments[svc] == nil || r.services[svc] == nil {
				t.Errorf("%s: want a Deployment and a Service", svc)
				continue
			}
			if cm := configMapOf(r, r.deployments[svc].Spec.Template.Spec.Containers[0]); cm == "" {
				t.Errorf("%s: its container reads no ConfigMap", svc)
			}
		}
	})
}

func configMapOf(r *rendered, c corev1.Container) string {
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil && r.configMaps[ef.ConfigMapRef.Name] != nil {
			return ef.ConfigMapRef.Name
		}
	}
	return ""
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// containerEnv is what a container's environment resolves to: literal
// values and ConfigMap values by name; secret and field references map to
// a marker (their value is not known here).
func containerEnv(t *testing.T, r *rendered, where string, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm := r.configMaps[ef.ConfigMapRef.Name]
			if cm == nil {
				t.Errorf("%s: envFrom ConfigMap %s is not rendered", where, ef.ConfigMapRef.Name)
				continue
			}
			for k, v := range cm.Data {
				env[ef.Prefix+k] = v
			}
		case ef.SecretRef != nil:
			t.Errorf("%s: envFrom Secret %s: name each secret variable instead", where, ef.SecretRef.Name)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			optional := ref.Optional != nil && *ref.Optional
			if s := r.secrets[ref.Name]; s != nil {
				if _, ok := s.Data[ref.Key]; !ok && !optional {
					t.Errorf("%s: Secret %s has no key %s", where, ref.Name, ref.Key)
				}
			} else if !optional && !slices.Contains(operatorSecrets[r.overlay], ref.Name) {
				t.Errorf("%s: Secret %s is neither rendered nor one the operator creates", where, ref.Name)
			}
			env[e.Name] = "<secret " + ref.Name + ">"
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm := r.configMaps[ref.Name]
			if cm == nil {
				t.Errorf("%s: ConfigMap %s is not rendered", where, ref.Name)
				continue
			}
			env[e.Name] = cm.Data[ref.Key]
		default:
			env[e.Name] = "<" + e.Name + ">"
		}
	}
	return env
}

// expandArgs substitutes $(VAR) the way the kubelet does, failing on a
// variable the container does not define (the kubelet would pass it
// through verbatim).
func expandArgs(t *testing.T, where string, args []string, env map[string]string) []string {
	t.Helper()
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = varRef.ReplaceAllStringFunc(a, func(m string) string {
			name := varRef.FindStringSubmatch(m)[1]
			v, ok := env[name]
			if !ok {
				t.Errorf("%s: arg %q uses $(%s), which the container does not define", where, a, name)
			}
			return v
		})
	}
	return out
}

// flagValues parses --name=value and --name value arguments.
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimLeft(a, "-")
		if k, v, ok := strings.Cut(name, "="); ok {
			out[k] = v
			continue
		}
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out[name] = args[i+1]
			i++
			continue
		}
		out[name] = "true"
	}
	return out
}

func TestEveryAddressNamesAServicePort(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		for _, w := range r.workloads() {
			for _, c := range w.template.Spec.Containers {
				where := fmt.Sprintf("%s %s container %s", w.kind, w.name, c.Name)
				env := containerEnv(t, r, where, c)
				args := expandArgs(t, where, c.Args, env)
				addrs := map[string]string{}
				for k, v := range env {
					if strings.HasSuffix(k, "_ADDR") {
						addrs["$"+k] = v
					}
				}
				for k, v := range flagValues(args) {
					if strings.HasSuffix(k, "-addr") {
						addrs["--"+k] = v
					}
				}
				for from, addr := range addrs {
					host, port, err := net.SplitHostPort(addr)
					if err != nil {
						t.Errorf("%s: %s=%q: %v", where, from, addr, err)
						continue
					}
					if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
						continue // a listen address (--metrics-addr=0.0.0.0:9090), not one dialed
					}
					svc := r.services[host]
					if svc == nil {
						t.Errorf("%s: %s=%q names no Service", where, from, addr)
						continue
					}
					n, _ := strconv.Atoi(port)
					if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == n }) {
						t.Errorf("%s: %s=%q: Service %s has no port %s", where, from, addr, host, port)
					}
				}
			}
		}
	})
}

func TestIngressServesMCPOverTLS(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		ing := r.ingresses["mcp-svc"]
		if ing == nil {
			t.Fatal("no Ingress mcp-svc")
		}
		tlsHosts := map[string]bool{}
		for _, tls := range ing.Spec.TLS {
			if tls.SecretName == "" {
				t.Error("TLS entry without a secretName")
			} else if r.secrets[tls.SecretName] == nil && !slices.Contains(operatorSecrets[r.overlay], tls.SecretName) {
				t.Errorf("TLS Secret %s is neither rendered nor one the operator creates", tls.SecretName)
			}
			for _, h := range tls.Hosts {
				tlsHosts[h] = true
			}
		}
		for _, rule := range ing.Spec.Rules {
			if !tlsHosts[rule.Host] {
				t.Errorf("host %q is served without TLS", rule.Host)
			}
			for _, p := range rule.HTTP.Paths {
				b := p.Backend.Service
				svc := r.services[b.Name]
				if svc == nil || b.Name != "mcp-svc" {
					t.Errorf("path %s: backend %s is not the mcp-svc Service", p.Path, b.Name)
					continue
				}
				if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool {
					return (b.Port.Name != "" && sp.Name == b.Port.Name) || (b.Port.Number != 0 && sp.Port == b.Port.Number)
				}) {
					t.Errorf("path %s: Service mcp-svc has no port %+v", p.Path, b.Port)
				}
			}
		}
		// The token check is mcp-svc's: it must not run in dev mode.
		c := r.deployments["mcp-svc"].Spec.Template.Spec.Containers[0]
		env := containerEnv(t, r, "mcp-svc", c)
		if _, ok := env["REALM_SERVE_TOKEN"]; !ok {
			t.Error("mcp-svc gets no REALM_SERVE_TOKEN")
		}
		if env["REALM_DEV"] == "1" || slices.Contains(expandArgs(t, "mcp-svc", c.Args, env), "--dev") {
			t.Error("mcp-svc runs in dev mode (no token check) behind an Ingress")
		}
	})
}

func TestRunnersAreNamedAfterTheirCapability(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		runners := 0
		for name, d := range r.deployments {
			if d.Spec.Template.Labels["app.kubernetes.io/component"] != "runner" {
				continue
			}
			runners++
			capability := d.Spec.Template.Labels["realm.dev/capability"]
			if capability == "" || name != "runner-"+capability {
				t.Errorf("runner Deployment %s: want it named runner-<realm.dev/capability> (capability %q)", name, capability)
			}
		}
		if runners == 0 {
			t.Error("no runner Deployments")
		}
	})
}

// TestEveryScrapedPodExposesItsMetricsPort: Prometheus's pod discovery
// scrapes the port a pod's prometheus.io/port annotation names; the pod must
// declare it as a containerPort, and say scrape "true" and a path.
func TestEveryScrapedPodExposesItsMetricsPort(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		scraped := 0
		for _, w := range r.workloads() {
			a := w.template.Annotations
			v, ok := a["prometheus.io/port"]
			if !ok {
				if _, ok := a["prometheus.io/scrape"]; ok {
					t.Errorf("%s %s: prometheus.io/scrape without prometheus.io/port", w.kind, w.name)
				}
				continue
			}
			scraped++
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				t.Errorf("%s %s: prometheus.io/port %q is not a port number", w.kind, w.name, v)
				continue
			}
			if !slices.ContainsFunc(w.template.Spec.Containers, func(c corev1.Container) bool {
				_, ok := containerPort(c, intstr.FromInt32(int32(n)))
				return ok
			}) {
				t.Errorf("%s %s: prometheus.io/port %s is no containerPort of the pod", w.kind, w.name, v)
			}
			if a["prometheus.io/scrape"] != "true" {
				t.Errorf("%s %s: prometheus.io/scrape = %q, want \"true\"", w.kind, w.name, a["prometheus.io/scrape"])
			}
			if !strings.HasPrefix(a["prometheus.io/path"], "/") {
				t.Errorf("%s %s: prometheus.io/path = %q, want a path", w.kind, w.name, a["prometheus.io/path"])
			}
		}
		for _, svc := range frontServices {
			if d := r.deployments[svc]; d != nil && d.Spec.Template.Annotations["prometheus.io/port"] == "" {
				t.Errorf("%s: its pods carry no prometheus.io/port annotation", svc)
			}
		}
		if scraped == 0 {
			t.Error("no pod is scraped")
		}
	})
}

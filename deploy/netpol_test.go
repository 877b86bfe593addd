package deploy

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The NetworkPolicy model of TestNetworkPoliciesAllowExactlyTheCallGraph.
//
// It evaluates the rendered policies the way the API defines them, for the
// parts the manifests use, and refuses what it does not model:
//
//   - A policy applies to the workloads (pod templates) its podSelector
//     matches; an empty podSelector matches every pod of the namespace.
//   - policyTypes default to Ingress, plus Egress when egress rules exist.
//     A pod selected by a policy of a type is isolated in that direction;
//     a pod no policy isolates is open (reported as "any *").
//   - What a pod may do is the union of the rules of its policies. A rule
//     with no peers admits any peer ("any"); with no ports, any port ("*").
//   - A peer is resolved to names: a podSelector alone selects workloads of
//     the rendered namespace (by name; a selector matching none is kept as
//     "pods{…}" so it shows up as extra); a namespaceSelector on
//     kubernetes.io/metadata.name is "ns:<name>" (with a podSelector,
//     "ns:<name>/pods{…}"; naming this overlay's namespace resolves to its
//     workloads); an ipBlock is "ip:<cidr>" with "-<except>,…".
//   - A port is "<number>/<protocol>" (protocol defaults to TCP), a named
//     port "<name>/<protocol>", a range "<from>-<endPort>/<protocol>".
//
// Egress is one pod's view (where it may send), ingress the other's (who
// may reach it): both are compared, so a one-sided extra allowance fails
// too, even though traffic needs both sides inside the namespace.

// netEdge is one allowance: from what peer to what port, seen from a
// workload in one direction.
type netEdge struct {
	dir      string // "egress" or "ingress"
	workload string
	peer     string
	port     string
}

func (e netEdge) String() string {
	if e.dir == "egress" {
		return fmt.Sprintf("%s -> %s %s", e.workload, e.peer, e.port)
	}
	return fmt.Sprintf("%s <- %s %s", e.workload, e.peer, e.port)
}

// Peers outside the namespace, as the model names them.
const (
	peerIngressController = "ns:ingress-nginx"
	peerMonitoring        = "ns:monitoring"
	peerObservability     = "ns:observability" // the OTLP collector (components/otlp)
	peerAny               = "any"
	// HTTPS to public addresses: the model providers.
	peerPublicV4 = "ip:0.0.0.0/0-10.0.0.0/8,100.64.0.0/10,169.254.0.0/16,172.16.0.0/12,192.168.0.0/16"
	peerPublicV6 = "ip:::/0-fc00::/7,fe80::/10"
	// prod's external Redis (the operator narrows the cidr).
	peerExternalRedis = "ip:0.0.0.0/0"
)

// intendedEdges is the call graph of docs/deploy.md's "What runs" table,
// for the workloads an overlay renders:
//
//	mcp-svc, listen-svc -> engine-svc:7070   (front doors)
//	listen-svc          -> agent-svc:7071
//	console-svc         -> engine-svc:7070   (the web console)
//	agent-svc           -> engine-svc:7070, providers 443
//	engine-svc          -> every runner:7072
//	runners             -> engine-svc:7070   (the registry)
//	runner-adapter      -> external 443      (if rendered)
//	engine-svc, agent-svc, listen-svc -> Redis (dev: the redis StatefulSet
//	                       on 6379; prod: an external address on 6379, 6380, 26379)
//	ingress controller  -> mcp-svc:8080, listen-svc:8090, console-svc:8070
//	monitoring          -> each metrics port (engine-svc, agent-svc,
//	                       mcp-svc, console-svc 9090; listen-svc 8090)
//	every pod           -> DNS (53 UDP and TCP, any peer)
//	every traced workload -> observability 4317, 4318 (only in the overlays
//	                       of tracedOverlays, which list components/otlp)
func intendedEdges(r *rendered) []netEdge {
	var out []netEdge
	call := func(from, to, port string) { // inside the namespace: both sides
		out = append(out, netEdge{"egress", from, to, port}, netEdge{"ingress", to, from, port})
	}
	egress := func(from, peer, port string) { out = append(out, netEdge{"egress", from, peer, port}) }
	ingress := func(peer, to, port string) { out = append(out, netEdge{"ingress", to, peer, port}) }

	call("mcp-svc", "engine-svc", "7070/TCP")
	call("listen-svc", "engine-svc", "7070/TCP")
	call("listen-svc", "agent-svc", "7071/TCP")
	call("console-svc", "engine-svc", "7070/TCP")
	call("agent-svc", "engine-svc", "7070/TCP")
	for _, ip := range []string{peerPublicV4, peerPublicV6} {
		egress("agent-svc", ip, "443/TCP")
	}
	for _, w := range r.workloads() {
		if w.template.Labels["app.kubernetes.io/component"] != "runner" {
			continue
		}
		call("engine-svc", w.name, "7072/TCP")
		call(w.name, "engine-svc", "7070/TCP")
		if w.name == "runner-adapter" {
			for _, ip := range []string{peerPublicV4, peerPublicV6} {
				egress(w.name, ip, "443/TCP")
			}
		}
	}
	for _, client := range []string{"engine-svc", "agent-svc", "listen-svc"} {
		if r.statefulSets["redis"] != nil {
			call(client, "redis", "6379/TCP")
		} else {
			for _, port := range []string{"6379/TCP", "6380/TCP", "26379/TCP"} {
				egress(client, peerExternalRedis, port)
			}
		}
	}
	ingress(peerIngressController, "mcp-svc", "8080/TCP")
	ingress(peerIngressController, "listen-svc", "8090/TCP")
	ingress(peerIngressController, "console-svc", "8070/TCP")
	ingress(peerMonitoring, "engine-svc", "9090/TCP")
	ingress(peerMonitoring, "agent-svc", "9090/TCP")
	ingress(peerMonitoring, "mcp-svc", "9090/TCP")
	ingress(peerMonitoring, "listen-svc", "8090/TCP")
	ingress(peerMonitoring, "console-svc", "9090/TCP")
	for _, w := range r.workloads() {
		egress(w.name, peerAny, "53/UDP")
		egress(w.name, peerAny, "53/TCP")
	}
	// notify-svc (components/notify, where listed): engine-svc, Slack over
	// HTTPS, Redis; Prometheus on its metrics port, the ingress controller
	// on its Events API port.
	if r.deployments["notify-svc"] != nil {
		call("notify-svc", "engine-svc", "7070/TCP")
		for _, ip := range []string{peerPublicV4, peerPublicV6} {
			egress("notify-svc", ip, "443/TCP")
		}
		if r.statefulSets["redis"] != nil {
			call("notify-svc", "redis", "6379/TCP")
		} else {
			for _, port := range []string{"6379/TCP", "6380/TCP", "26379/TCP"} {
				egress("notify-svc", peerExternalRedis, port)
			}
		}
		ingress(peerMonitoring, "notify-svc", "9090/TCP")
		ingress(peerIngressController, "notify-svc", "3000/TCP") // the Events API
	}
	out = append(out, otlpEdges(r)...)
	return out
}

// allowedEdges evaluates the rendered NetworkPolicies (see the model above).
func allowedEdges(t *testing.T, r *rendered) []netEdge {
	t.Helper()
	var out []netEdge
	for _, w := range r.workloads() {
		isolated := map[string]bool{}
		for _, name := range sortedKeys(r.policies) {
			p := r.policies[name]
			if !podSelectorMatches(t, &p.Spec.PodSelector, w.template.Labels) {
				continue
			}
			types := p.Spec.PolicyTypes
			if len(types) == 0 {
				types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
				if len(p.Spec.Egress) > 0 {
					types = append(types, networkingv1.PolicyTypeEgress)
				}
			}
			for _, ty := range types {
				isolated[strings.ToLower(string(ty))] = true
			}
			if slices.Contains(types, networkingv1.PolicyTypeIngress) {
				for _, rule := range p.Spec.Ingress {
					for _, peer := range peerNames(t, r, "policy "+name, rule.From) {
						for _, port := range portNames(rule.Ports) {
							out = append(out, netEdge{"ingress", w.name, peer, port})
						}
					}
				}
			}
			if slices.Contains(types, networkingv1.PolicyTypeEgress) {
				for _, rule := range p.Spec.Egress {
					for _, peer := range peerNames(t, r, "policy "+name, rule.To) {
						for _, port := range portNames(rule.Ports) {
							out = append(out, netEdge{"egress", w.name, peer, port})
						}
					}
				}
			}
		}
		for _, dir := range []string{"ingress", "egress"} {
			if !isolated[dir] {
				out = append(out, netEdge{dir, w.name, peerAny, "*"})
			}
		}
	}
	return out
}

// podSelectorMatches is a policy's podSelector: empty selects every pod.
func podSelectorMatches(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(podLabels))
}

func peerNames(t *testing.T, r *rendered, where string, peers []networkingv1.NetworkPolicyPeer) []string {
	t.Helper()
	if len(peers) == 0 {
		return []string{peerAny}
	}
	var out []string
	for _, p := range peers {
		switch {
		case p.IPBlock != nil:
			name := "ip:" + p.IPBlock.CIDR
			if len(p.IPBlock.Except) > 0 {
				except := slices.Clone(p.IPBlock.Except)
				sort.Strings(except)
				name += "-" + strings.Join(except, ",")
			}
			out = append(out, name)
		case p.NamespaceSelector != nil:
			ns := p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
			if ns == "" || len(p.NamespaceSelector.MatchLabels) != 1 || len(p.NamespaceSelector.MatchExpressions) > 0 {
				t.Errorf("%s: namespaceSelector %v: the model knows only matchLabels kubernetes.io/metadata.name", where, p.NamespaceSelector)
				continue
			}
			if ns == r.namespace {
				out = append(out, workloadsSelected(t, r, p.PodSelector)...)
				continue
			}
			name := "ns:" + ns
			if p.PodSelector != nil && (len(p.PodSelector.MatchLabels) > 0 || len(p.PodSelector.MatchExpressions) > 0) {
				name += "/pods" + metav1.FormatLabelSelector(p.PodSelector)
			}
			out = append(out, name)
		case p.PodSelector != nil:
			out = append(out, workloadsSelected(t, r, p.PodSelector)...)
		default:
			t.Errorf("%s: a peer with no selector or ipBlock", where)
		}
	}
	return out
}

// workloadsSelected names the workloads a peer's podSelector (nil or empty:
// every pod) selects in the rendered namespace.
func workloadsSelected(t *testing.T, r *rendered, sel *metav1.LabelSelector) []string {
	t.Helper()
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	var out []string
	for _, w := range r.workloads() {
		if podSelectorMatches(t, sel, w.template.Labels) {
			out = append(out, w.name)
		}
	}
	if len(out) == 0 {
		out = append(out, "pods{"+metav1.FormatLabelSelector(sel)+"}")
	}
	return out
}

func portNames(ports []networkingv1.NetworkPolicyPort) []string {
	if len(ports) == 0 {
		return []string{"*"}
	}
	var out []string
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		port := "*"
		if p.Port != nil {
			port = p.Port.String()
		}
		if p.EndPort != nil {
			port += fmt.Sprintf("-%d", *p.EndPort)
		}
		out = append(out, port+"/"+string(proto))
	}
	return out
}

// diffEdges returns what got has beyond want, and what it lacks.
func diffEdges(got, want []netEdge) (extra, missing []string) {
	g, w := map[netEdge]bool{}, map[netEdge]bool{}
	for _, e := range got {
		g[e] = true
	}
	for _, e := range want {
		w[e] = true
	}
	for e := range g {
		if !w[e] {
			extra = append(extra, e.String())
		}
	}
	for e := range w {
		if !g[e] {
			missing = append(missing, e.String())
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	return extra, missing
}

func TestNetworkPoliciesAllowExactlyTheCallGraph(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		extra, missing := diffEdges(allowedEdges(t, r), intendedEdges(r))
		for _, e := range extra {
			t.Errorf("allowed but not in the call graph: %s", e)
		}
		for _, e := range missing {
			t.Errorf("in the call graph but not allowed: %s", e)
		}
	})
}

// TestNetworkPolicyModelCatchesChanges breaks the rendered policies in
// memory and checks the comparison notices: an extra peer, a missing peer,
// a widened port and a dropped default deny.
func TestNetworkPolicyModelCatchesChanges(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(r *rendered)
		want   string // in an extra or missing edge
	}{
		{"extra peer: mcp-svc reaches agent-svc", func(r *rendered) {
			p := r.policies["mcp-svc"]
			p.Spec.Egress[0].To = append(p.Spec.Egress[0].To, networkingv1.NetworkPolicyPeer{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "agent-svc"}}})
		}, "mcp-svc -> agent-svc 7070/TCP"},
		{"missing peer: runners no longer reach engine-svc", func(r *rendered) {
			r.policies["realm-runners"].Spec.Egress = nil
		}, "runner-examples -> engine-svc 7070/TCP"},
		{"widened: engine-svc ingress on every port", func(r *rendered) {
			r.policies["engine-svc"].Spec.Ingress[0].Ports = nil
		}, "engine-svc <- mcp-svc *"},
		{"monitoring reaches engine-svc's gRPC port", func(r *rendered) {
			for _, rule := range r.policies["engine-svc"].Spec.Ingress {
				for _, p := range rule.From {
					if p.NamespaceSelector != nil {
						rule.Ports[0].Port.IntVal = 7070
					}
				}
			}
		}, "engine-svc <- ns:monitoring 7070/TCP"},
		{"no policy isolates the runners", func(r *rendered) {
			delete(r.policies, "realm-default-deny")
			delete(r.policies, "realm-runners")
		}, "runner-examples <- any *"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, filepath.Join("k8s", "overlays", "dev"))
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

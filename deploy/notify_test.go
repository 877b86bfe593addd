package deploy

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestNotifySvcOnlyWhereTheComponentIsListed: components/notify adds
// notify-svc to the overlays that list it (prod-notify) and to no other,
// reading its manifest from the notify-svc-manifest Secret at the path
// --manifest names.
func TestNotifySvcOnlyWhereTheComponentIsListed(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		d := r.deployments["notify-svc"]
		if (d != nil) != (r.overlay == "prod-notify") {
			t.Fatalf("notify-svc rendered: %v", d != nil)
		}
		if d == nil {
			return
		}
		c := d.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--manifest=/etc/realm/notify/realm.yaml") {
			t.Errorf("args %v do not name the mounted manifest", c.Args)
		}
		mounted := false
		for _, m := range c.VolumeMounts {
			if m.MountPath != "/etc/realm/notify" {
				continue
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "notify-svc-manifest" &&
					len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "realm.yaml" && m.ReadOnly {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("realm.yaml of Secret notify-svc-manifest is not mounted read-only at /etc/realm/notify")
		}
	})
}

// TestTheEventsAPIIngressReachesNotifySvc: where notify-svc is rendered,
// the Ingress notify-svc-events sends https://<the overlay's host>/slack/events
// (the one path notify-svc's events listener serves) over TLS to the
// Service notify-svc-events, whose port is notify-svc's events port 3000;
// the overlay has patched the component's placeholders.
func TestTheEventsAPIIngressReachesNotifySvc(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		ing, d := r.ingresses["notify-svc-events"], r.deployments["notify-svc"]
		if (ing != nil) != (d != nil) {
			t.Fatalf("Ingress notify-svc-events rendered: %v, notify-svc: %v", ing != nil, d != nil)
		}
		if ing == nil {
			return
		}
		if len(ing.Spec.Rules) != 1 || len(ing.Spec.TLS) != 1 {
			t.Fatalf("rules %+v, tls %+v: want one of each", ing.Spec.Rules, ing.Spec.TLS)
		}
		rule, tls := ing.Spec.Rules[0], ing.Spec.TLS[0]
		if r.overlay == "prod-notify" && (rule.Host != "slack-events.realm.example.com" || tls.SecretName != "realm-slack-events-tls") {
			t.Errorf("host %q, TLS Secret %q: the overlay's patch did not replace the placeholders", rule.Host, tls.SecretName)
		}
		if strings.Contains(rule.Host, "SLACK_EVENTS") || !slices.Contains(tls.Hosts, rule.Host) {
			t.Errorf("host %q is a placeholder or not served over TLS (%v)", rule.Host, tls.Hosts)
		}
		if !slices.Contains(operatorSecrets[r.overlay], tls.SecretName) {
			t.Errorf("TLS Secret %s is not one the operator creates", tls.SecretName)
		}
		if rule.HTTP == nil || len(rule.HTTP.Paths) != 1 {
			t.Fatalf("paths: %+v", rule.HTTP)
		}
		p := rule.HTTP.Paths[0]
		if p.Path != "/slack/events" || p.PathType == nil || *p.PathType != networkingv1.PathTypeExact {
			t.Errorf("path %q (%v): want exactly /slack/events", p.Path, p.PathType)
		}
		b := p.Backend.Service
		svc := r.services[b.Name]
		if b.Name != "notify-svc-events" || svc == nil || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Fatalf("backend %+v is not a Service selecting notify-svc", b)
		}
		i := slices.IndexFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == b.Port.Name && b.Port.Name != "" })
		if i < 0 {
			t.Fatalf("Service %s has no port %+v", b.Name, b.Port)
		}
		if port, ok := containerPort(d.Spec.Template.Spec.Containers[0], svc.Spec.Ports[i].TargetPort); !ok || port != 3000 {
			t.Errorf("Service port %s targets %s: notify-svc's port %d (found %v), want 3000", b.Port.Name, svc.Spec.Ports[i].TargetPort.String(), port, ok)
		}
	})
}

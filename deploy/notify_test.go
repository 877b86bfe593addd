package deploy

import (
	"slices"
	"testing"
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

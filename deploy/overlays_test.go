package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDevRunsOneOfEachAndADurableRedis(t *testing.T) {
	t.Parallel()
	r := render(t, filepath.Join("k8s", "overlays", "dev"))
	for _, w := range r.workloads() {
		if w.replicas != 1 {
			t.Errorf("%s %s: %d replicas, want 1", w.kind, w.name, w.replicas)
		}
	}
	redis := r.statefulSets["redis"]
	if len(r.statefulSets) != 1 || redis == nil {
		t.Fatalf("StatefulSets %v, want exactly redis", sortedKeys(r.statefulSets))
	}
	args := flagValues(redis.Spec.Template.Spec.Containers[0].Args)
	if args["appendonly"] != "yes" || args["appendfsync"] != "always" {
		t.Errorf("redis args %v: want --appendonly yes --appendfsync always (no acknowledged write lost)", redis.Spec.Template.Spec.Containers[0].Args)
	}
	if len(redis.Spec.VolumeClaimTemplates) == 0 {
		t.Error("redis has no volume: its append-only file would not survive the pod")
	}
	// Every service that keeps state in Redis takes its REDIS_* variables
	// from one rendered Secret whose REDIS_URL names the in-cluster Redis
	// Service (its keys are the variables' names, so a Cluster or
	// Sentinel is a change of Secret, not of manifests).
	for _, name := range []string{"engine-svc", "agent-svc", "listen-svc"} {
		var ref string
		c := r.deployments[name].Spec.Template.Spec.Containers[0]
		for _, e := range c.Env {
			if e.Name == "REDIS_URL" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == "REDIS_URL" {
				ref = e.ValueFrom.SecretKeyRef.Name
			}
		}
		if s := r.secrets[ref]; s == nil || !strings.Contains(string(s.Data["REDIS_URL"]), "://redis:6379") {
			t.Errorf("%s's Redis Secret %q is not rendered or its REDIS_URL does not name the redis Service", name, ref)
		}
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--redis-url") {
				t.Errorf("%s passes %s: it would pin a standalone server over the Secret's topology", name, a)
			}
		}
	}
}

func TestProdRunsThreeReplicasSpreadAutoscaledAndBudgeted(t *testing.T) {
	t.Parallel()
	r := render(t, filepath.Join("k8s", "overlays", "prod"))
	if len(r.statefulSets) != 0 {
		t.Errorf("prod runs StatefulSets %v; its Redis is external", sortedKeys(r.statefulSets))
	}
	if r.secrets["realm-redis"] != nil {
		t.Error("prod renders realm-redis; the operator creates it with the external Redis's URL")
	}
	for _, name := range []string{"engine-svc", "mcp-svc", "listen-svc"} {
		d := r.deployments[name]
		if d == nil {
			t.Errorf("no Deployment %s", name)
			continue
		}
		if got := replicasOf(d.Spec.Replicas); got != 3 {
			t.Errorf("%s: %d replicas, want 3", name, got)
		}
		hpa := r.hpas[name]
		switch {
		case hpa == nil:
			t.Errorf("%s: no HorizontalPodAutoscaler", name)
		case hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != name:
			t.Errorf("%s: HPA targets %s %s", name, hpa.Spec.ScaleTargetRef.Kind, hpa.Spec.ScaleTargetRef.Name)
		case hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 3 || hpa.Spec.MaxReplicas < *hpa.Spec.MinReplicas:
			t.Errorf("%s: HPA min %v max %d, want min at least 3", name, hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
		}
		pdb := r.pdbs[name]
		if pdb == nil {
			t.Errorf("%s: no PodDisruptionBudget", name)
		} else {
			if !selectorMatches(t, pdb.Spec.Selector, d.Spec.Template.Labels) {
				t.Errorf("%s: PDB selector %v does not match its pods", name, pdb.Spec.Selector)
			}
			if m := pdb.Spec.MinAvailable; m == nil || m.IntValue() < 1 || m.IntValue() >= 3 {
				t.Errorf("%s: PDB minAvailable %v, want between 1 and 2 so a drain can proceed", name, m)
			}
		}
		keys := map[string]bool{}
		for _, tsc := range d.Spec.Template.Spec.TopologySpreadConstraints {
			if !selectorMatches(t, tsc.LabelSelector, d.Spec.Template.Labels) {
				t.Errorf("%s: spread over %s selects other pods (%v)", name, tsc.TopologyKey, tsc.LabelSelector)
			}
			keys[tsc.TopologyKey] = true
		}
		if !keys["topology.kubernetes.io/zone"] || !keys["kubernetes.io/hostname"] {
			t.Errorf("%s: spread keys %v, want zone and hostname", name, sortedKeys(keys))
		}
	}
	// Every PDB and HPA governs pods that exist.
	for name, pdb := range r.pdbs {
		if !slices.ContainsFunc(r.workloads(), func(w workload) bool { return selectorMatches(t, pdb.Spec.Selector, w.template.Labels) }) {
			t.Errorf("PDB %s selects no pods", name)
		}
	}
	for name, hpa := range r.hpas {
		if r.deployments[hpa.Spec.ScaleTargetRef.Name] == nil {
			t.Errorf("HPA %s scales a Deployment that is not rendered", name)
		}
	}
}

func TestDocsTellTheOperatorWhatToCreate(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	var want []string
	for _, secrets := range operatorSecrets {
		want = append(want, secrets...)
	}
	want = append(want, "realm-providers", "appendfsync always", "REALM_SERVE_TOKEN", "make images",
		"prometheus.io/port", "kubernetes.io/metadata.name: monitoring", "--metrics-addr=0.0.0.0:9090", "--shutdown-grace=60s",
		"deploy/k8s/components/otlp", "kubernetes.io/metadata.name: observability", "realm-otlp")
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("docs/deploy.md does not mention %q", w)
		}
	}
}

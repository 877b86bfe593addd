package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository root: tests run in deploy/.
const repoRoot = ".."

// rendered is one overlay's output, decoded into the k8s.io/api types.
type rendered struct {
	overlay      string
	namespace    string
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	ingresses    map[string]*networkingv1.Ingress
	policies     map[string]*networkingv1.NetworkPolicy
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs         map[string]*policyv1.PodDisruptionBudget
	certificates map[string]*certificate
	issuers      map[string]*issuer
}

// workload is a Deployment or StatefulSet: what pods exist.
type workload struct {
	kind, name string
	replicas   int32
	template   *corev1.PodTemplateSpec
}

func (r *rendered) workloads() []workload {
	var out []workload
	for _, name := range sortedKeys(r.deployments) {
		d := r.deployments[name]
		out = append(out, workload{"Deployment", name, replicasOf(d.Spec.Replicas), &d.Spec.Template})
	}
	for _, name := range sortedKeys(r.statefulSets) {
		s := r.statefulSets[name]
		out = append(out, workload{"StatefulSet", name, replicasOf(s.Spec.Replicas), &s.Spec.Template})
	}
	return out
}

func replicasOf(p *int32) int32 {
	if p == nil {
		return 1 // the API's default
	}
	return *p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// overlays lists deploy/k8s/overlays/*: every overlay is rendered and checked.
func overlays(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("k8s", "overlays"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) < 2 {
		t.Fatalf("overlays = %v, want at least dev and prod", out)
	}
	return out
}

// render builds a kustomization directory with the kustomize library (as
// `kubectl kustomize` does) and decodes every object strictly.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	r, err := renderDir(dir)
	if err != nil {
		t.Fatalf("render %s: %v", dir, err)
	}
	return r
}

// kustomizing serialises kustomize runs: kyaml builds its OpenAPI schema
// lazily in package globals without a lock, which the race detector
// catches when parallel tests render overlays at once.
var kustomizing sync.Mutex

func renderDir(dir string) (*rendered, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	kustomizing.Lock()
	resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
	kustomizing.Unlock()
	if err != nil {
		return nil, err
	}
	r := &rendered{
		overlay:      filepath.Base(dir),
		deployments:  map[string]*appsv1.Deployment{},
		statefulSets: map[string]*appsv1.StatefulSet{},
		services:     map[string]*corev1.Service{},
		configMaps:   map[string]*corev1.ConfigMap{},
		secrets:      map[string]*corev1.Secret{},
		ingresses:    map[string]*networkingv1.Ingress{},
		policies:     map[string]*networkingv1.NetworkPolicy{},
		hpas:         map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		pdbs:         map[string]*policyv1.PodDisruptionBudget{},
		certificates: map[string]*certificate{},
		issuers:      map[string]*issuer{},
	}
	namespaces := map[string]bool{}
	for _, res := range resources.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			return nil, err
		}
		gvk := res.GetApiVersion() + "/" + res.GetKind()
		name := res.GetName()
		namespaces[res.GetNamespace()] = true
		var target any
		switch gvk {
		case "apps/v1/Deployment":
			target = into(r.deployments, name)
		case "apps/v1/StatefulSet":
			target = into(r.statefulSets, name)
		case "v1/Service":
			target = into(r.services, name)
		case "v1/ConfigMap":
			target = into(r.configMaps, name)
		case "v1/Secret":
			target = into(r.secrets, name)
		case "networking.k8s.io/v1/Ingress":
			target = into(r.ingresses, name)
		case "networking.k8s.io/v1/NetworkPolicy":
			target = into(r.policies, name)
		case "autoscaling/v2/HorizontalPodAutoscaler":
			target = into(r.hpas, name)
		case "policy/v1/PodDisruptionBudget":
			target = into(r.pdbs, name)
		case "cert-manager.io/v1/Certificate":
			target = into(r.certificates, name)
		case "cert-manager.io/v1/Issuer":
			target = into(r.issuers, name)
		default:
			return nil, fmt.Errorf("%s %s: a kind the test does not know; add it to render", gvk, name)
		}
		if err := decodeStrict(y, target); err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk, name, err)
		}
	}
	if len(namespaces) != 1 {
		return nil, fmt.Errorf("objects span namespaces %v; want one", sortedKeys(namespaces))
	}
	for ns := range namespaces {
		r.namespace = ns
	}
	return r, nil
}

// into allocates m[name] and returns it for decoding; a name twice is
// caught by kustomize already.
func into[T any](m map[string]*T, name string) *T {
	v := new(T)
	m[name] = v
	return v
}

// decodeStrict refuses duplicate keys, unknown fields, wrong types and
// case-mismatched field names, as the API server's strict validation does.
func decodeStrict(y []byte, target any) error {
	j, err := yaml.YAMLToJSONStrict(y)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, target, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		return fmt.Errorf("strict decoding: %v", strict)
	}
	return nil
}

func TestStrictDecodingRefusesBadManifests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		yaml string
	}{
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {selectr: {a: b}}\n"},
		{"wrong type", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: \"http\"}]}\n"},
		{"field name in the wrong case", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {Selector: {a: b}}\n"},
		{"duplicate key", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {type: ClusterIP, type: NodePort}\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var svc corev1.Service
			if err := decodeStrict([]byte(tc.yaml), &svc); err == nil {
				t.Fatalf("decoded without error: %+v", svc.Spec)
			}
		})
	}
}

func TestEveryKustomizationRenders(t *testing.T) {
	t.Parallel()
	dirs := []string{filepath.Join("k8s", "base")}
	for _, o := range overlays(t) {
		dirs = append(dirs, filepath.Join("k8s", "overlays", o))
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			r := render(t, dir)
			if len(r.deployments) == 0 {
				t.Fatal("no Deployments rendered")
			}
			if dir != filepath.Join("k8s", "base") && r.namespace == "" {
				t.Error("overlay leaves objects without a namespace")
			}
		})
	}
}

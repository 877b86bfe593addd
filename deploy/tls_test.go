package deploy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Mutual TLS between the services (issue #18): every Realm Deployment
// mounts its own cert-manager certificate, and only its own, and the
// certificate names who it is.

// The interface of the binaries (pkg and the services read these).
const (
	tlsDir     = "/etc/realm/tls"
	issuerName = "realm-ca" // every service Certificate's Issuer
)

// tlsEnv is each TLS variable and the file of the Secret it names.
var tlsEnv = map[string]string{
	"REALM_TLS_CERT": "tls.crt",
	"REALM_TLS_KEY":  "tls.key",
	"REALM_TLS_CA":   "ca.crt",
}

// serviceRoles is the role (the certificate's first organizationalUnit)
// of each service; every runner's is "runner".
var serviceRoles = map[string]string{
	"engine-svc":  "engine",
	"mcp-svc":     "front-door",
	"listen-svc":  "front-door",
	"console-svc": "front-door",
	"agent-svc":   "front-door",
	"notify-svc":  "front-door", // only where components/notify is listed
}

// optionalServices are the services of serviceRoles that only overlays
// listing their component run.
var optionalServices = map[string]bool{"notify-svc": true}

// operatorIssuers are the Issuers an overlay expects the platform to
// provide in its namespace (docs/deploy.md says how); any other must be
// rendered.
var operatorIssuers = map[string][]string{
	"prod":        {issuerName},
	"prod-otlp":   {issuerName},
	"prod-notify": {issuerName},
}

// certUsages are the key usages every service certificate needs: each one
// serves (engine-svc, agent-svc, runners) and calls.
var certUsages = []string{"digital signature", "key encipherment", "server auth", "client auth"}

func isRunner(w workload) bool { return w.template.Labels["app.kubernetes.io/component"] == "runner" }

// realmWorkloads are the Deployments that run a Realm binary: the
// services and every runner.
func realmWorkloads(r *rendered) []workload {
	var out []workload
	for _, w := range r.workloads() {
		if w.kind == "Deployment" && (serviceRoles[w.name] != "" || isRunner(w)) {
			out = append(out, w)
		}
	}
	return out
}

// certificateFor is the Certificate whose Secret is <workload>-tls.
func certificateFor(r *rendered, name string) *certificate {
	for _, c := range r.certificates {
		if c.Spec.SecretName == name+"-tls" {
			return c
		}
	}
	return nil
}

// checkTLS returns what is wrong with the overlay's certificates and the
// way the Deployments use them.
func checkTLS(t *testing.T, r *rendered) []string {
	t.Helper()
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// The Secrets cert-manager writes, and whose they are.
	certSecrets := map[string]string{}
	for name, c := range r.certificates {
		certSecrets[c.Spec.SecretName] = name
	}
	mountedBy := map[string][]string{}

	workloads := realmWorkloads(r)
	if len(workloads) == 0 {
		errorf("no Realm Deployment rendered")
	}
	for _, w := range workloads {
		pod := w.template.Spec
		own := w.name + "-tls"
		// Secret volumes: a certificate's Secret only if it is its own.
		volumes := map[string]string{} // volume -> Secret
		for _, v := range pod.Volumes {
			var secrets []string
			switch {
			case v.Secret != nil:
				secrets = append(secrets, v.Secret.SecretName)
			case v.Projected != nil:
				for _, s := range v.Projected.Sources {
					if s.Secret != nil {
						secrets = append(secrets, s.Secret.Name)
					}
				}
			}
			for _, s := range secrets {
				if _, isCert := certSecrets[s]; isCert {
					if s != own {
						errorf("Deployment %s: volume %s holds Secret %s, another's certificate (it may mount only %s)", w.name, v.Name, s, own)
						continue
					}
					if v.Secret == nil {
						errorf("Deployment %s: volume %s projects %s; mount the Secret whole", w.name, v.Name, s)
						continue
					}
					volumes[v.Name] = s
					mountedBy[s] = append(mountedBy[s], w.name)
				}
			}
		}
		if len(volumes) != 1 {
			errorf("Deployment %s: %d volumes of its certificate's Secret %s, want 1", w.name, len(volumes), own)
		}
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			where := fmt.Sprintf("Deployment %s container %s", w.name, c.Name)
			var mounts []corev1.VolumeMount
			for _, m := range c.VolumeMounts {
				if _, ok := volumes[m.Name]; ok || m.MountPath == tlsDir || strings.HasPrefix(m.MountPath, tlsDir+"/") {
					mounts = append(mounts, m)
				}
			}
			env := containerEnv(t, r, where, c)
			for k, v := range env {
				if secret, ok := strings.CutPrefix(v, "<secret "); ok {
					if secret = strings.TrimSuffix(secret, ">"); certSecrets[secret] != "" {
						errorf("%s: %s reads certificate Secret %s; the certificate comes as files", where, k, secret)
					}
				}
			}
			if c.Name != pod.Containers[0].Name {
				for _, m := range mounts {
					errorf("%s: mounts %s at %s; only the service's container holds its key", where, m.Name, m.MountPath)
				}
				continue
			}
			if len(mounts) != 1 || mounts[0].MountPath != tlsDir || volumes[mounts[0].Name] != own {
				errorf("%s: certificate mounts %v, want %s's Secret %s at %s only", where, mounts, w.name, own, tlsDir)
			} else if !mounts[0].ReadOnly || mounts[0].SubPath != "" {
				errorf("%s: %s is mounted writable or by subPath (a subPath mount never sees a renewed certificate)", where, tlsDir)
			}
			for name, file := range tlsEnv {
				if got, want := env[name], path.Join(tlsDir, file); got != want {
					errorf("%s: %s = %q, want %q", where, name, got, want)
				}
			}
			checkCertificate(r, w, c, errorf)
		}
	}
	// Every service certificate is used, by one Deployment.
	for secret, name := range certSecrets {
		c := r.certificates[name]
		if c.Spec.IsCA {
			if len(mountedBy[secret]) > 0 {
				errorf("CA Certificate %s: its Secret (the CA's key) is mounted by %v", name, mountedBy[secret])
			}
			continue
		}
		if len(mountedBy[secret]) != 1 {
			errorf("Certificate %s: its Secret %s is mounted by %v, want exactly one Deployment", name, secret, mountedBy[secret])
		}
	}
	// Every Certificate's issuer exists or is the platform's.
	for _, name := range sortedKeys(r.certificates) {
		ref := r.certificates[name].Spec.IssuerRef
		if ref.Kind != "Issuer" || (ref.Group != "" && ref.Group != "cert-manager.io") {
			errorf("Certificate %s: issuer %s %s/%s, want an Issuer (cert-manager.io)", name, ref.Kind, ref.Group, ref.Name)
			continue
		}
		if r.issuers[ref.Name] == nil && !slices.Contains(operatorIssuers[r.overlay], ref.Name) {
			errorf("Certificate %s: Issuer %s is neither rendered nor one the platform provides", name, ref.Name)
		}
		if r.issuers[ref.Name] != nil && slices.Contains(operatorIssuers[r.overlay], ref.Name) {
			errorf("Issuer %s is rendered, but the overlay expects the platform to provide it", ref.Name)
		}
	}
	return problems
}

// checkCertificate checks the Certificate of one Realm Deployment: its
// identity (commonName, role), usages, issuer, validity and names.
func checkCertificate(r *rendered, w workload, c corev1.Container, errorf func(string, ...any)) {
	cert := certificateFor(r, w.name)
	if cert == nil {
		errorf("Deployment %s: no Certificate with secretName %s-tls", w.name, w.name)
		return
	}
	where := "Certificate " + cert.Name
	spec := cert.Spec
	name, role := w.name, serviceRoles[w.name]
	if isRunner(w) {
		role = "runner"
		// A runner's identity is the name it registers with (--name).
		if n := flagValues(c.Args)["name"]; n != w.name {
			errorf("Deployment %s: --name=%q, want its own name (the identity its certificate names)", w.name, n)
		}
	}
	if spec.CommonName != name {
		errorf("%s: commonName %q, want %q", where, spec.CommonName, name)
	}
	if spec.Subject == nil || len(spec.Subject.OrganizationalUnits) == 0 || spec.Subject.OrganizationalUnits[0] != role {
		errorf("%s: subject %+v, want organizationalUnits [%s]", where, spec.Subject, role)
	}
	if spec.IsCA {
		errorf("%s: isCA on a service certificate", where)
	}
	for _, u := range certUsages {
		if !slices.Contains(spec.Usages, u) {
			errorf("%s: usages %v lack %q", where, spec.Usages, u)
		}
	}
	if spec.IssuerRef.Name != issuerName {
		errorf("%s: issuer %q, want %q", where, spec.IssuerRef.Name, issuerName)
	}
	if len(spec.IPAddresses) > 0 {
		errorf("%s: ipAddresses %v: pod addresses change; name the service", where, spec.IPAddresses)
	}
	d, err1 := time.ParseDuration(spec.Duration)
	rb, err2 := time.ParseDuration(spec.RenewBefore)
	if err1 != nil || err2 != nil || rb <= 0 || rb >= d {
		errorf("%s: duration %q, renewBefore %q: want both, renewal before expiry", where, spec.Duration, spec.RenewBefore)
	}
	var want []string
	if r.services[w.name] != nil {
		// The names a caller may dial it by in the namespace.
		want = []string{name, name + "." + r.namespace + ".svc", name + "." + r.namespace + ".svc.cluster.local"}
		if name == "engine-svc" {
			// The operator's CLI through kubectl port-forward.
			want = append(want, "localhost")
		}
	} else {
		// A runner without a Service: the host it advertises when that is
		// a name; a pod address cannot be in a certificate, so its name.
		want = []string{name}
		adv := flagValues(c.Args)["advertise"]
		if host, _, err := net.SplitHostPort(adv); err == nil && !strings.Contains(host, "$(") && net.ParseIP(host) == nil {
			want = append(want, host)
		}
	}
	for _, n := range want {
		if !slices.Contains(spec.DNSNames, n) {
			errorf("%s: dnsNames %v lack %q", where, spec.DNSNames, n)
		}
	}
	for _, n := range spec.DNSNames {
		if !slices.Contains(want, n) {
			errorf("%s: dnsName %q names nothing of %s in namespace %s", where, n, w.name, r.namespace)
		}
	}
	if role != "runner" && len(spec.URIs) > 0 {
		errorf("%s: URI SANs %v on a %s certificate; only runners name capabilities", where, spec.URIs, role)
	}
}

func TestEveryServiceMountsItsOwnCertificate(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		for _, p := range checkTLS(t, r) {
			t.Error(p)
		}
		want := 0
		for name := range serviceRoles {
			if !optionalServices[name] || r.deployments[name] != nil {
				want++
			}
		}
		if got := len(realmWorkloads(r)); got < want+1 {
			t.Errorf("%d Realm Deployments, want the %d services and a runner", got, want)
		}
	})
}

// TestEveryDialedServiceHasItsNameInItsCertificate: each address a
// container dials (a *_ADDR variable, an --*-addr flag) names a Service
// whose pods' certificate carries that host name, so the caller's
// verification of the server's name succeeds.
func TestEveryDialedServiceHasItsNameInItsCertificate(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		dialed := 0
		for _, w := range realmWorkloads(r) {
			c := w.template.Spec.Containers[0]
			where := fmt.Sprintf("Deployment %s", w.name)
			env := containerEnv(t, r, where, c)
			addrs := map[string]string{}
			for k, v := range env {
				if strings.HasSuffix(k, "_ADDR") {
					addrs[k] = v
				}
			}
			for k, v := range flagValues(expandArgs(t, where, c.Args, env)) {
				if strings.HasSuffix(k, "-addr") {
					addrs["--"+k] = v
				}
			}
			for from, addr := range addrs {
				host, _, err := net.SplitHostPort(addr)
				if err != nil || net.ParseIP(host) != nil {
					continue // a listen address; TestEveryAddressNamesAServicePort checks the rest
				}
				svc := r.services[strings.SplitN(host, ".", 2)[0]]
				if svc == nil {
					continue
				}
				dialed++
				var target string
				for _, t := range realmWorkloads(r) {
					if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(t.template.Labels)) {
						target = t.name
					}
				}
				cert := certificateFor(r, target)
				if cert == nil {
					t.Errorf("%s: %s=%s: the pods behind Service %s have no certificate", where, from, addr, svc.Name)
					continue
				}
				if !slices.Contains(cert.Spec.DNSNames, host) {
					t.Errorf("%s: %s=%s: Certificate %s does not name %q (dnsNames %v)", where, from, addr, cert.Name, host, cert.Spec.DNSNames)
				}
			}
		}
		if dialed == 0 {
			t.Error("no container dials a Service")
		}
	})
}

// runnerCapabilities is what a runner Deployment serves, by the binary its
// image holds: realm:handler:<name> and realm:adapter:<name>, as its
// certificate must list them. The list is read from the runner's source,
// so a handler added there and not to the certificate fails here.
func runnerCapabilities(t *testing.T, r *rendered, w workload) ([]string, error) {
	t.Helper()
	c := w.template.Spec.Containers[0]
	where := "Deployment " + w.name
	env := containerEnv(t, r, where, c)
	flags := flagValues(expandArgs(t, where, c.Args, env))
	if _, ok := flags["manifest"]; ok || env["REALM_MANIFEST"] != "" {
		return nil, fmt.Errorf("%s serves a manifest (realm.yaml) too; this test cannot read what it adds: list its capabilities here", w.name)
	}
	image := path.Base(strings.SplitN(c.Image, ":", 2)[0])
	var out []string
	switch image {
	case "example-runner":
		handlers, err := exampleRunnerHandlers()
		if err != nil {
			return nil, err
		}
		for _, h := range handlers {
			out = append(out, "realm:handler:"+h)
		}
	case "adapter-runner":
		// services/adapter-runner/adapters.Catalog: http always,
		// filesystem with a root.
		out = append(out, "realm:adapter:http")
		if flags["filesystem-root"] != "" {
			out = append(out, "realm:adapter:filesystem")
		}
	default:
		return nil, fmt.Errorf("%s runs image %s: add what that runner serves to runnerCapabilities", w.name, c.Image)
	}
	slices.Sort(out)
	return out, nil
}

// exampleRunnerHandlers reads the handler names example-runner registers:
// the Name of every Registration literal in handlers.Registrations, which
// its main serves (and nothing else without a manifest).
func exampleRunnerHandlers() ([]string, error) {
	dir := filepath.Join(repoRoot, "services", "example-runner")
	main, err := os.ReadFile(filepath.Join(dir, "cmd", "example-runner", "main.go"))
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(main), "Handlers: handlers.Registrations(),") {
		return nil, fmt.Errorf("example-runner's main no longer serves handlers.Registrations(): update exampleRunnerHandlers")
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "handlers", "*.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	found := false
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "Registrations" || fn.Recv != nil {
				continue
			}
			found = true
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				kv, ok := n.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Name" {
					lit, ok := kv.Value.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						err = fmt.Errorf("%s: a Registration whose Name is not a string literal", fset.Position(kv.Pos()))
						return false
					}
					s, _ := strconv.Unquote(lit.Value)
					names = append(names, s)
				}
				return true
			})
			if err != nil {
				return nil, err
			}
		}
	}
	if !found || len(names) == 0 {
		return nil, fmt.Errorf("no handler names found in %s's Registrations", filepath.Join(dir, "handlers"))
	}
	return names, nil
}

// checkRunnerCertificates returns how each runner's certificate differs
// from what the runner serves: it must list exactly those capabilities.
func checkRunnerCertificates(t *testing.T, r *rendered) []string {
	t.Helper()
	var problems []string
	runners := 0
	for _, w := range realmWorkloads(r) {
		if !isRunner(w) {
			continue
		}
		runners++
		cert := certificateFor(r, w.name)
		if cert == nil {
			problems = append(problems, fmt.Sprintf("runner %s: no Certificate", w.name))
			continue
		}
		want, err := runnerCapabilities(t, r, w)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		got := slices.Sorted(slices.Values(cert.Spec.URIs))
		if !slices.Equal(got, slices.Compact(got)) {
			problems = append(problems, fmt.Sprintf("Certificate %s: a capability listed twice in %v", cert.Name, cert.Spec.URIs))
			got = slices.Compact(got)
		}
		for _, u := range got {
			if !slices.Contains(want, u) {
				problems = append(problems, fmt.Sprintf("Certificate %s: URI SAN %q is not a capability %s serves (%v)", cert.Name, u, w.name, want))
			}
		}
		for _, u := range want {
			if !slices.Contains(got, u) {
				problems = append(problems, fmt.Sprintf("Certificate %s: %s serves %q, which its certificate does not grant", cert.Name, w.name, u))
			}
		}
	}
	if runners == 0 {
		problems = append(problems, "no runner Deployment")
	}
	return problems
}

func TestRunnerCertificatesGrantExactlyWhatTheyServe(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		for _, p := range checkRunnerCertificates(t, r) {
			t.Error(p)
		}
	})
}

func TestExampleRunnerHandlersAreReadFromItsSource(t *testing.T) {
	t.Parallel()
	got, err := exampleRunnerHandlers()
	if err != nil {
		t.Fatal(err)
	}
	// A sample the source has long had; the full list is whatever
	// Registrations holds.
	for _, h := range []string{"order_total", "show", "slow"} {
		if !slices.Contains(got, h) {
			t.Errorf("handlers %v lack %s", got, h)
		}
	}
}

// TestNoGRPCProbes: with TLS on the gRPC ports the kubelet's gRPC probes
// (which present no certificate) would fail; every Realm container is
// probed over HTTP on a port it declares, or by TCP.
func TestNoGRPCProbes(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		for _, w := range r.workloads() {
			for _, c := range w.template.Spec.Containers {
				for kind, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
					if p != nil && p.GRPC != nil {
						t.Errorf("%s %s container %s: %s probe is gRPC", w.kind, w.name, c.Name, kind)
					}
					if p != nil && p.HTTPGet != nil && p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
						t.Errorf("%s %s container %s: %s probe is HTTPS; the probe ports serve plain HTTP", w.kind, w.name, c.Name, kind)
					}
				}
			}
		}
	})
}

// TestDevIssuesFromItsOwnCA: dev renders the chain self-signed Issuer ->
// CA Certificate -> Issuer realm-ca (type ca, on that certificate's
// Secret); prod renders no Issuer (the platform's realm-ca).
func TestDevIssuesFromItsOwnCA(t *testing.T) {
	t.Parallel()
	forEachOverlay(t, func(t *testing.T, r *rendered) {
		if slices.Contains(operatorIssuers[r.overlay], issuerName) {
			if len(r.issuers) > 0 {
				t.Errorf("renders Issuers %v; the platform provides %s", sortedKeys(r.issuers), issuerName)
			}
			return
		}
		ca := r.issuers[issuerName]
		if ca == nil || ca.Spec.CA == nil || ca.Spec.SelfSigned != nil {
			t.Fatalf("no Issuer %s of type ca", issuerName)
		}
		var caCert *certificate
		for _, c := range r.certificates {
			if c.Spec.SecretName == ca.Spec.CA.SecretName {
				caCert = c
			}
		}
		if caCert == nil || !caCert.Spec.IsCA {
			t.Fatalf("Issuer %s signs with Secret %s, which no CA Certificate (isCA) writes", issuerName, ca.Spec.CA.SecretName)
		}
		root := r.issuers[caCert.Spec.IssuerRef.Name]
		if caCert.Spec.IssuerRef.Kind != "Issuer" || root == nil || root.Spec.SelfSigned == nil {
			t.Errorf("CA Certificate %s is issued by %s %s, want a rendered self-signed Issuer", caCert.Name, caCert.Spec.IssuerRef.Kind, caCert.Spec.IssuerRef.Name)
		}
		if caCert.Spec.IssuerRef.Name == issuerName {
			t.Errorf("CA Certificate %s is issued by the CA it makes", caCert.Name)
		}
	})
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"cert-manager", "kind: Issuer", "name: " + issuerName, tlsDir, "REALM_TLS_CERT", "organizationalUnits", "realm:handler:"} {
		if !strings.Contains(string(doc), w) {
			t.Errorf("docs/deploy.md does not mention %q", w)
		}
	}
}

// TestTLSCheckCatchesChanges breaks the rendered objects in memory and
// checks that checkTLS and checkRunnerCertificates notice.
func TestTLSCheckCatchesChanges(t *testing.T) {
	t.Parallel()
	volume := func(r *rendered, deploy, name string) *corev1.Volume {
		vs := r.deployments[deploy].Spec.Template.Spec.Volumes
		for i := range vs {
			if vs[i].Name == name {
				return &vs[i]
			}
		}
		t.Fatalf("Deployment %s has no volume %s", deploy, name)
		return nil
	}
	container := func(r *rendered, deploy string) *corev1.Container {
		return &r.deployments[deploy].Spec.Template.Spec.Containers[0]
	}
	type mutation struct {
		name   string
		mutate func(r *rendered)
		want   string // in a problem
	}
	cases := []mutation{
		{"another service's Secret", func(r *rendered) {
			volume(r, "mcp-svc", "tls").Secret.SecretName = "engine-svc-tls"
		}, "another's certificate"},
		{"a second certificate mounted", func(r *rendered) {
			d := r.deployments["listen-svc"]
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "agent", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "agent-svc-tls"}}})
		}, "Deployment listen-svc: volume agent holds Secret agent-svc-tls"},
		{"no certificate mounted", func(r *rendered) {
			c := container(r, "agent-svc")
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "tls" })
		}, "want agent-svc's Secret agent-svc-tls at /etc/realm/tls only"},
		{"mounted writable", func(r *rendered) {
			for i, m := range container(r, "engine-svc").VolumeMounts {
				if m.Name == "tls" {
					container(r, "engine-svc").VolumeMounts[i].ReadOnly = false
				}
			}
		}, "mounted writable"},
		{"key variable elsewhere", func(r *rendered) {
			for i, e := range container(r, "engine-svc").Env {
				if e.Name == "REALM_TLS_KEY" {
					container(r, "engine-svc").Env[i].Value = "/tmp/tls.key"
				}
			}
		}, "REALM_TLS_KEY = \"/tmp/tls.key\""},
		{"CA variable missing", func(r *rendered) {
			c := container(r, "runner-examples")
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "REALM_TLS_CA" })
		}, "REALM_TLS_CA = \"\""},
		{"wrong role", func(r *rendered) {
			r.certificates["listen-svc"].Spec.Subject.OrganizationalUnits = []string{"operator"}
		}, "want organizationalUnits [front-door]"},
		{"wrong common name", func(r *rendered) {
			r.certificates["engine-svc"].Spec.CommonName = "engine"
		}, "Certificate engine-svc: commonName"},
		{"no client auth", func(r *rendered) {
			r.certificates["agent-svc"].Spec.Usages = []string{"digital signature", "key encipherment", "server auth"}
		}, "lack \"client auth\""},
		{"another issuer", func(r *rendered) {
			r.certificates["mcp-svc"].Spec.IssuerRef.Name = "letsencrypt"
		}, "issuer \"letsencrypt\""},
		{"a ClusterIssuer", func(r *rendered) {
			r.certificates["mcp-svc"].Spec.IssuerRef.Kind = "ClusterIssuer"
		}, "want an Issuer"},
		{"a Certificate nobody mounts", func(r *rendered) {
			c := *r.certificates["engine-svc"]
			c.Name, c.Spec.SecretName = "spare", "spare-tls"
			r.certificates["spare"] = &c
		}, "Certificate spare: its Secret spare-tls is mounted by []"},
		{"dnsName of another namespace", func(r *rendered) {
			r.certificates["engine-svc"].Spec.DNSNames[1] = "engine-svc.realm.svc"
		}, "lack \"engine-svc.realm-dev.svc\""},
		{"the CA's key mounted", func(r *rendered) {
			volume(r, "engine-svc", "tls").Secret.SecretName = "realm-ca"
		}, "holds Secret realm-ca"},
	}
	runnerCases := []mutation{
		{"a handler left out", func(r *rendered) {
			c := r.certificates["runner-examples"]
			c.Spec.URIs = slices.DeleteFunc(slices.Clone(c.Spec.URIs), func(u string) bool { return u == "realm:handler:slow" })
		}, "serves \"realm:handler:slow\""},
		{"a capability it does not serve", func(r *rendered) {
			c := r.certificates["runner-examples"]
			c.Spec.URIs = append(slices.Clone(c.Spec.URIs), "realm:adapter:http")
		}, "URI SAN \"realm:adapter:http\" is not a capability"},
		{"every handler", func(r *rendered) {
			r.certificates["runner-examples"].Spec.URIs = []string{"realm:handler:*"}
		}, "URI SAN \"realm:handler:*\""},
		{"a manifest served too", func(r *rendered) {
			c := container(r, "runner-examples")
			c.Args = append(slices.Clone(c.Args), "--manifest=/etc/realm/realm.yaml")
		}, "serves a manifest"},
	}
	// Each case breaks one thing in a fresh render; check must see it.
	run := func(cases []mutation, check func(*testing.T, *rendered) []string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := render(t, filepath.Join("k8s", "overlays", "dev"))
				if problems := check(t, r); len(problems) > 0 {
					t.Fatalf("the rendered overlay is already wrong: %v", problems)
				}
				tc.mutate(r)
				problems := check(t, r)
				if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
					t.Errorf("the change went unnoticed: want %q among %v", tc.want, problems)
				}
			})
		}
	}
	run(cases, checkTLS)
	run(runnerCases, checkRunnerCertificates)
}

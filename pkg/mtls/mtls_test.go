package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/pkg/errcode"
)

var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

func devDir(t *testing.T, specs ...Spec) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := EnsureDev(dir, specs, time.Now()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestACertificateStatesItsNameRoleAndGrants(t *testing.T) {
	t.Parallel()
	dir := devDir(t, Spec{Name: "shop", Role: RoleRunner, Grants: []string{"handler:total", "adapter:http"}})
	id, err := IdentityOf(readCert(t, filepath.Join(dir, "shop.crt")))
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "shop" || id.Role != RoleRunner || strings.Join(id.Grants, " ") != "adapter:http handler:total" {
		t.Fatalf("identity = %+v", id)
	}
	for _, c := range []struct {
		kind, name string
		may        bool
	}{{KindHandler, "total", true}, {KindAdapter, "http", true}, {KindHandler, "http", false}, {KindHandler, "other", false}} {
		if got := id.May(c.kind, c.name); got != c.may {
			t.Errorf("May(%s, %s) = %v", c.kind, c.name, got)
		}
	}
	if !(Identity{Grants: []string{"handler:*"}}).May(KindHandler, "any") {
		t.Error("handler:* grants every handler")
	}
	if _, err := IdentityOf(readCert(t, filepath.Join(dir, "ca.crt"))); err == nil || !strings.Contains(err.Error(), "no known role") {
		t.Errorf("the CA names no role: %v", err)
	}
}

func TestEnsureDevKeepsWhatIsCurrentAndReissuesWhatChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	specs := []Spec{{Name: "engine-svc", Role: RoleEngine}, {Name: "shop", Role: RoleRunner, Grants: []string{"handler:a"}}}
	issued, err := EnsureDev(dir, specs, t0)
	if err != nil || strings.Join(issued, ",") != "ca,engine-svc,shop" {
		t.Fatalf("first: %v %v", issued, err)
	}
	if issued, err = EnsureDev(dir, specs, t0.Add(time.Hour)); err != nil || len(issued) != 0 {
		t.Fatalf("again: %v %v", issued, err)
	}
	specs[1].Grants = append(specs[1].Grants, "handler:b")
	if issued, err = EnsureDev(dir, specs, t0.Add(time.Hour)); err != nil || strings.Join(issued, ",") != "shop" {
		t.Fatalf("a new grant: %v %v", issued, err)
	}
	// Near its end a certificate is issued again; the CA lives longer.
	// (shop was issued an hour later, so is not near its end yet.)
	if issued, err = EnsureDev(dir, specs, t0.Add(devCertLife-renewBefore)); err != nil || strings.Join(issued, ",") != "engine-svc" {
		t.Fatalf("near the end: %v %v", issued, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "shop.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode: %v %v", fi.Mode(), err)
	}
	if _, err := EnsureDev(dir, []Spec{{Name: "../x", Role: RoleRunner}}, t0); err == nil {
		t.Fatal("a name that leaves the folder was accepted")
	}
}

// tlsPeer is a context as a TLS server sees a caller with cert.
func tlsPeer(cert *x509.Certificate) context.Context {
	st := tls.ConnectionState{}
	if cert != nil {
		st.VerifiedChains = [][]*x509.Certificate{{cert}}
	}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: st}})
}

func TestPolicyRefusesWithASentenceNamingWhatWasRefused(t *testing.T) {
	t.Parallel()
	dir := devDir(t, Spec{Name: "shop", Role: RoleRunner}, Spec{Name: "mcp-svc", Role: RoleFrontDoor}, Spec{Name: "operator", Role: RoleOperator})
	p := Policy{
		Service: "engine-svc",
		Rules: map[string][]Role{
			"/realm.v1.RegistryService/":         {RoleRunner, RoleOperator},
			"/realm.v1.EngineService/StartRun":   {RoleFrontDoor, RoleOperator},
			"/realm.v1.RegistryService/ListCaps": {RoleOperator},
		},
		Open:     []string{"/grpc.health.v1.Health/"},
		Describe: map[Role]string{RoleRunner: "may call only the registry"},
	}
	cert := func(name string) *x509.Certificate { return readCert(t, filepath.Join(dir, name+".crt")) }
	for _, c := range []struct {
		name, method string
		caller       *x509.Certificate
		code         codes.Code
		says         string
	}{
		{"no certificate", "/realm.v1.EngineService/StartRun", nil, codes.Unauthenticated, "engine-svc refused EngineService.StartRun: the caller presented no client certificate."},
		{"health needs none", "/grpc.health.v1.Health/Check", nil, codes.OK, ""},
		{"runner off its part", "/realm.v1.EngineService/PurgeRun", cert("shop"), codes.PermissionDenied, "engine-svc refused EngineService.PurgeRun from shop: role runner may call only the registry; EngineService.PurgeRun needs role operator."},
		{"runner on its part", "/realm.v1.RegistryService/Register", cert("shop"), codes.OK, ""},
		{"the method's own rule wins", "/realm.v1.RegistryService/ListCaps", cert("shop"), codes.PermissionDenied, "needs role operator"},
		{"front door acts on runs", "/realm.v1.EngineService/StartRun", cert("mcp-svc"), codes.OK, ""},
		{"a method nobody named is the operator's", "/realm.v1.EngineService/Future", cert("mcp-svc"), codes.PermissionDenied, "needs role operator"},
		{"the operator may", "/realm.v1.EngineService/Future", cert("operator"), codes.OK, ""},
		{"a certificate without a role", "/realm.v1.EngineService/StartRun", cert("ca"), codes.Unauthenticated, "names no known role"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, err := p.Authorize(tlsPeer(c.caller), c.method)
			if status.Code(err) != c.code || !strings.Contains(status.Convert(err).Message(), c.says) {
				t.Fatalf("Authorize = %v; want %v saying %q", err, c.code, c.says)
			}
			if err != nil {
				if e, ok := errcode.FromStatus(err); !ok || (e.Code != errcode.EngineUnauthenticated && e.Code != errcode.EnginePermissionDenied) {
					t.Errorf("the code travels in the status details: %v", e)
				}
				return
			}
			if id, ok := FromContext(ctx); c.caller != nil && (!ok || id.Name != c.caller.Subject.CommonName) {
				t.Errorf("identity in context = %+v, %v", id, ok)
			}
		})
	}
}

func TestPlaintextOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{"127.0.0.1:7070": true, "[::1]:7070": true, "localhost:7070": true, "127.0.0.1:0": true,
		"0.0.0.0:7070": false, ":7070": false, "10.0.0.5:7070": false, "engine-svc:7070": false, "[::]:7070": false} {
		if err := CheckPlaintext("engine-svc", addr); (err == nil) != ok {
			t.Errorf("CheckPlaintext(%s) = %v", addr, err)
		}
	}
}

// serveHealth serves the gRPC health check with f's certificate on a
// loopback port until the test ends.
func serveHealth(t *testing.T, f Files) string {
	t.Helper()
	creds, err := f.ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// serverSerial dials addr with f and returns the serial of the
// certificate the server presented.
func serverSerial(t *testing.T, addr string, f Files, roles ...Role) (string, error) {
	t.Helper()
	creds, err := f.ClientCredentials(roles...)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return "", err
	}
	return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber.String(), nil
}

func TestARotatedCertificateServesTheNextConnection(t *testing.T) {
	t.Parallel()
	dir := devDir(t, Spec{Name: "engine-svc", Role: RoleEngine}, Spec{Name: "operator", Role: RoleOperator})
	addr := serveHealth(t, DevFiles(dir, "engine-svc"))
	before, err := serverSerial(t, addr, DevFiles(dir, "operator"), RoleEngine)
	if err != nil {
		t.Fatal(err)
	}
	// A new certificate in the same files, as cert-manager rotates one.
	if _, err := EnsureDev(dir, []Spec{{Name: "engine-svc", Role: RoleEngine, Hosts: []string{"127.0.0.1", "localhost"}}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	after, err := serverSerial(t, addr, DevFiles(dir, "operator"), RoleEngine)
	if err != nil {
		t.Fatal(err)
	}
	if before == after {
		t.Fatal("the server still presents the certificate it started with")
	}
}

func TestAClientChecksTheServersRole(t *testing.T) {
	t.Parallel()
	dir := devDir(t, Spec{Name: "impostor", Role: RoleRunner}, Spec{Name: "operator", Role: RoleOperator})
	addr := serveHealth(t, DevFiles(dir, "impostor"))
	_, err := serverSerial(t, addr, DevFiles(dir, "operator"), RoleEngine)
	if err == nil || !strings.Contains(err.Error(), "presented the certificate of impostor (role runner); this connection wants role engine") {
		t.Fatalf("a runner's certificate stood in for the engine: %v", err)
	}
	if _, err := serverSerial(t, addr, DevFiles(dir, "operator")); err != nil {
		t.Fatalf("without a wanted role any Realm certificate serves: %v", err)
	}
	other := devDir(t, Spec{Name: "operator", Role: RoleOperator})
	if _, err := serverSerial(t, addr, DevFiles(other, "operator")); err == nil {
		t.Fatal("a server whose certificate another CA signed was trusted")
	}
}

func TestMissingFilesAreNamed(t *testing.T) {
	t.Parallel()
	err := Files{Cert: "c.pem"}.Check(true)
	if err == nil || !strings.Contains(err.Error(), "missing: --tls-key (REALM_TLS_KEY) and --tls-client-ca or --tls-ca") {
		t.Fatalf("Check = %v", err)
	}
	err = Files{Cert: "/nonexistent/c.pem", Key: "/nonexistent/k.pem", CA: "/nonexistent/ca.pem"}.Check(false)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/c.pem") {
		t.Fatalf("Check = %v", err)
	}
}

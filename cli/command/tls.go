package command

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/mtls"
)

// tlsFlags are the global --tls-cert, --tls-key and --tls-ca.
type tlsFlags struct{ cert, key, ca string }

func (a *app) addTLSFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&a.tlsFlags.cert, "tls-cert", "", "the operator certificate, PEM (default $"+mtls.CertEnv+", else operator.crt in the data folder's tls/ when `make run` made it)")
	pf.StringVar(&a.tlsFlags.key, "tls-key", "", "its private key, PEM (default $"+mtls.KeyEnv+")")
	pf.StringVar(&a.tlsFlags.ca, "tls-ca", "", "the Realm CA the services' certificates chain to, PEM (default $"+mtls.CAEnv+")")
}

// tlsFiles are the TLS files the CLI calls addr with: the flags, else
// REALM_TLS_*, else the operator certificate `make run` made in the data
// folder ($REALM_DATA_DIR or ~/.realm, under tls/), unless the server at
// addr answers a TLS handshake as a plaintext server does. None of them:
// plaintext, which a service serves on loopback only.
func (a *app) tlsFiles(addr string) mtls.Files {
	f := mtls.Files{Cert: a.tlsFlags.cert, Key: a.tlsFlags.key, CA: a.tlsFlags.ca}
	env := mtls.FromEnv(a.env.Getenv)
	f.Cert = firstNonEmpty(f.Cert, env.Cert)
	f.Key = firstNonEmpty(f.Key, env.Key)
	f.CA = firstNonEmpty(f.CA, env.CA)
	if f.Configured() {
		return f
	}
	if dir := a.devTLSDir(); dir != "" {
		dev := mtls.DevFiles(dir, "operator")
		if fileExists(dev.Cert) && fileExists(dev.Key) && fileExists(dev.CA) && !speaksPlaintext(addr) {
			return dev
		}
	}
	return f
}

// devTLSDir is where `make run` keeps the development certificates:
// tls/ in $REALM_DATA_DIR, else in ~/.realm; "" when neither is known.
func (a *app) devTLSDir() string {
	if d := strings.TrimSpace(a.env.Getenv("REALM_DATA_DIR")); d != "" {
		return filepath.Join(d, "tls")
	}
	if home := strings.TrimSpace(a.env.Getenv("HOME")); home != "" {
		return filepath.Join(home, ".realm", "tls")
	}
	return ""
}

// speaksPlaintext reports whether the server at addr (the first, of a
// list) hangs up on a TLS handshake: a stack started by hand without TLS,
// next to the certificates an earlier `make run` left. A server that is
// not there counts as TLS: the call then says it cannot reach it.
func speaksPlaintext(addr string) bool {
	first, _, _ := strings.Cut(addr, ",")
	d := &net.Dialer{Timeout: 2 * time.Second}
	raw, err := d.Dial("tcp", strings.TrimSpace(first))
	if err != nil {
		return false
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(2 * time.Second))
	// Only whether the server speaks TLS at all: its certificate is
	// checked by the real connection.
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a probe, no data sent
	err = conn.Handshake()
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return false
	}
	return err != nil
}

// transport is the dial option for the service at addr, whose
// certificate must state one of roles.
func (a *app) transport(addr string, roles ...mtls.Role) (grpc.DialOption, error) {
	opt, err := client.Transport(a.tlsFiles(addr), roles...)
	if err != nil {
		return nil, refuse("Error: %v", err)
	}
	return opt, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// devServices are the certificates `realm tls dev` issues besides the
// runners': one per service of `make run`, and the operator's for the CLI.
var devServices = []mtls.Spec{
	{Name: "engine-svc", Role: mtls.RoleEngine},
	{Name: "agent-svc", Role: mtls.RoleFrontDoor},
	{Name: "mcp-svc", Role: mtls.RoleFrontDoor},
	{Name: "listen-svc", Role: mtls.RoleFrontDoor},
	{Name: "console-svc", Role: mtls.RoleFrontDoor},
	// notify-svc reads runs and records replies in Slack (docs/notifications.md).
	{Name: "notify-svc", Role: mtls.RoleFrontDoor},
	{Name: "operator", Role: mtls.RoleOperator},
}

func (a *app) tlsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Certificates for mutual TLS between Realm's services",
	}
	var dir string
	var runners []string
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Make (or refresh) a development CA and a certificate per service of `make run`",
		Long: `Makes a development CA (ca.crt, ca.key) in the folder and, signed by it, a
certificate and key per service of ` + "`make run`" + ` (engine-svc, agent-svc, mcp-svc,
listen-svc, console-svc, notify-svc), the operator's for this CLI, and one per --runner, for localhost,
127.0.0.1 and ::1. What is there and still right is kept; the rest is issued
again. The CLI finds operator.crt there by itself. For development only: a
real deployment's certificates come from its own CA (docs/security.md).`,
		Example: `  realm tls dev --runner "example-runner=$(bin/example-runner --capabilities | paste -sd, -)"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				dir = a.devTLSDir()
			}
			if dir == "" {
				return refuse("Error: no folder: give --dir, or set REALM_DATA_DIR or HOME")
			}
			specs := append([]mtls.Spec(nil), devServices...)
			for _, r := range runners {
				name, grants, ok := strings.Cut(r, "=")
				if !ok || strings.TrimSpace(name) == "" {
					return refuse("Error: --runner %q: want NAME=GRANT,GRANT (handler:<name>, adapter:<name>, or realm:handler:<name> as --capabilities prints)", r)
				}
				s := mtls.Spec{Name: strings.TrimSpace(name), Role: mtls.RoleRunner}
				for _, g := range strings.Split(grants, ",") {
					if g = strings.TrimPrefix(strings.TrimSpace(g), "realm:"); g != "" {
						kind, _, _ := strings.Cut(g, ":")
						if kind != mtls.KindHandler && kind != mtls.KindAdapter {
							return refuse("Error: --runner %q: grant %q is neither handler:<name> nor adapter:<name>", r, g)
						}
						s.Grants = append(s.Grants, g)
					}
				}
				specs = append(specs, s)
			}
			issued, err := mtls.EnsureDev(dir, specs, a.env.Now())
			if err != nil {
				return refuse("Error: %v", err)
			}
			if len(issued) == 0 {
				fmt.Fprintf(a.env.Stdout, "Development certificates in %s are current.\n", dir)
			} else {
				fmt.Fprintf(a.env.Stdout, "Issued in %s: %s.\n", dir, strings.Join(issued, ", "))
			}
			return nil
		},
	}
	dev.Flags().StringVar(&dir, "dir", "", "the folder (default tls/ in $REALM_DATA_DIR, else ~/.realm/tls)")
	dev.Flags().StringArrayVar(&runners, "runner", nil, "a runner's certificate: NAME=GRANT,GRANT (repeatable)")
	cmd.AddCommand(dev)
	return cmd
}

// Package mtls is how Realm's services prove who they are to each other:
// mutual TLS with certificates from one Realm CA, whose subject names the
// service (common name) and its role (first organizational unit), and, for
// a runner, the capabilities it may register (URI SANs realm:handler:<name>
// and realm:adapter:<name>). It loads certificate files (re-read when they
// change, so a rotated certificate needs no restart), builds gRPC transport
// credentials, checks each call's role against a service's rules, issues a
// development CA for `make run`, and refuses plaintext off loopback.
package mtls

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Role is what a certificate's holder may do.
type Role string

// The roles (docs/security.md lists what each may call).
const (
	// RoleEngine is engine-svc: the only caller runners take.
	RoleEngine Role = "engine"
	// RoleRunner may call only the capability registry, and register only
	// the capabilities its certificate grants.
	RoleRunner Role = "runner"
	// RoleFrontDoor is mcp-svc, listen-svc and agent-svc: the run acts.
	RoleFrontDoor Role = "front-door"
	// RoleOperator is the CLI: everything, including purge, drain,
	// register, gc and migrate.
	RoleOperator Role = "operator"
)

// Roles are every role, in the order docs list them.
var Roles = []Role{RoleOperator, RoleFrontDoor, RoleRunner, RoleEngine}

// Known reports whether r is one of Roles.
func (r Role) Known() bool { return slices.Contains(Roles, r) }

// Capability kinds a runner certificate grants.
const (
	KindHandler = "handler"
	KindAdapter = "adapter"
)

// grantScheme is the URI scheme of a capability grant: realm:handler:x.
const grantScheme = "realm"

// Identity is who a verified certificate names.
type Identity struct {
	// Name is the subject's common name: the service or runner name.
	Name string
	// Role is the subject's first organizational unit.
	Role Role
	// Grants are the capabilities a runner certificate names, each
	// "<kind>:<name>" (a name of "*" grants every capability of the kind).
	Grants []string
}

// IdentityOf reads the identity a certificate states. A certificate
// without a name or with an unknown role names nobody: its holder is
// refused as if it had none.
func IdentityOf(c *x509.Certificate) (Identity, error) {
	if c == nil {
		return Identity{}, errors.New("no certificate")
	}
	id := Identity{Name: c.Subject.CommonName}
	if len(c.Subject.OrganizationalUnit) > 0 {
		id.Role = Role(c.Subject.OrganizationalUnit[0])
	}
	switch {
	case id.Name == "":
		return Identity{}, errors.New("the certificate has no common name (the service's name)")
	case !id.Role.Known():
		return Identity{}, fmt.Errorf("the certificate of %s names no known role in its organizational unit (%q; want one of %s)", id.Name, id.Role, roleList(Roles))
	}
	for _, u := range c.URIs {
		if u.Scheme == grantScheme && u.Opaque != "" {
			id.Grants = append(id.Grants, u.Opaque)
		}
	}
	sort.Strings(id.Grants)
	return id, nil
}

// May reports whether the identity's certificate grants the capability
// kind:name.
func (id Identity) May(kind, name string) bool {
	return slices.Contains(id.Grants, kind+":"+name) || slices.Contains(id.Grants, kind+":*")
}

// String is "<name> (role <role>)", as refusals name a caller.
func (id Identity) String() string { return fmt.Sprintf("%s (role %s)", id.Name, id.Role) }

// GrantURI is the URI SAN that grants capability kind:name.
func GrantURI(kind, name string) string { return grantScheme + ":" + kind + ":" + name }

func roleList(rs []Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

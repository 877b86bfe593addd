package mtls

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/realm-go/realm/pkg/errcode"
)

// Policy is which roles may call which methods of one service.
type Policy struct {
	// Service names the server in refusals ("engine-svc").
	Service string
	// Rules maps a full method ("/realm.v1.EngineService/PurgeRun") or a
	// whole service ("/realm.v1.RegistryService/") to the roles that may
	// call it; the method's own entry wins. A method in neither is the
	// operator's alone.
	Rules map[string][]Role
	// Open are methods any caller may use, with or without a certificate
	// (the gRPC health check, which probes cannot present one for).
	Open []string
	// Describe says, for a refusal, what a role may call ("may call only
	// the capability registry").
	Describe map[Role]string
}

// allowed is the roles that may call method.
func (p Policy) allowed(method string) []Role {
	if rs, ok := p.Rules[method]; ok {
		return rs
	}
	if i := strings.LastIndex(method, "/"); i > 0 {
		if rs, ok := p.Rules[method[:i+1]]; ok {
			return rs
		}
	}
	return []Role{RoleOperator}
}

func (p Policy) open(method string) bool {
	for _, o := range p.Open {
		if o == method || strings.HasSuffix(o, "/") && strings.HasPrefix(method, o) {
			return true
		}
	}
	return false
}

type identityKey struct{}

// FromContext is the verified identity of the call's caller, if it
// presented a certificate over TLS.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// peerIdentity reads the caller's verified certificate from the
// connection. ok is false when the caller presented none.
func peerIdentity(ctx context.Context) (id Identity, ok bool, err error) {
	p, found := peer.FromContext(ctx)
	if !found {
		return Identity{}, false, nil
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return Identity{}, false, nil
	}
	id, err = IdentityOf(info.State.VerifiedChains[0][0])
	return id, err == nil, err
}

// Authorize checks the caller of method against p and returns the context
// carrying its identity, or the refusal: UNAUTHENTICATED for a caller
// without a usable certificate, PERMISSION_DENIED for a role the method
// is not for. The refusal's sentence names what was refused.
func (p Policy) Authorize(ctx context.Context, method string) (context.Context, error) {
	id, ok, err := peerIdentity(ctx)
	if ok {
		ctx = context.WithValue(ctx, identityKey{}, id)
	}
	if p.open(method) {
		return ctx, nil
	}
	short := shortMethod(method)
	if err != nil {
		return ctx, errcode.ToStatus(errcode.Newf(errcode.EngineUnauthenticated,
			"%s refused %s: %v. Nothing was done; every call needs a certificate from the Realm CA naming a role (docs/security.md).", p.Service, short, err)).Err()
	}
	if !ok {
		return ctx, errcode.ToStatus(errcode.Newf(errcode.EngineUnauthenticated,
			"%s refused %s: the caller presented no client certificate. Nothing was done; every call needs a certificate from the Realm CA (--tls-cert, --tls-key, --tls-ca; docs/security.md).", p.Service, short)).Err()
	}
	roles := p.allowed(method)
	if slices.Contains(roles, id.Role) {
		return ctx, nil
	}
	what := p.Describe[id.Role]
	if what == "" {
		what = "may call none of " + p.Service + "'s methods"
	}
	return ctx, errcode.ToStatus(errcode.Newf(errcode.EnginePermissionDenied,
		"%s refused %s from %s: role %s %s; %s needs role %s. Nothing was done.", p.Service, short, id.Name, id.Role, what, short, roleList(roles)).
		WithDetails(map[string]any{"method": method, "caller": id.Name, "role": string(id.Role)})).Err()
}

// shortMethod is "EngineService.PurgeRun" for "/realm.v1.EngineService/PurgeRun".
func shortMethod(full string) string {
	s := strings.TrimPrefix(full, "/")
	if i := strings.LastIndex(s, "/"); i >= 0 {
		svc := s[:i]
		if j := strings.LastIndex(svc, "."); j >= 0 {
			svc = svc[j+1:]
		}
		return svc + "." + s[i+1:]
	}
	return s
}

// ServerOptions are the gRPC server options that serve TLS with creds and
// check every call against p.
func (p Policy) ServerOptions(creds credentials.TransportCredentials) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(creds),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := p.Authorize(ctx, info.FullMethod)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := p.Authorize(ss.Context(), info.FullMethod)
			if err != nil {
				return err
			}
			return h(srv, &identityStream{ServerStream: ss, ctx: ctx})
		}),
	}
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// Refuse is a PERMISSION_DENIED for a caller a handler checked itself
// (a runner registering a capability its certificate does not grant).
func Refuse(format string, args ...any) error {
	return errcode.ToStatus(errcode.New(errcode.EnginePermissionDenied, fmt.Sprintf(format, args...))).Err()
}

package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/mtls"
)

// Registry implements realmv1.RegistryServiceServer over the shared registry.
type Registry struct {
	realmv1.UnimplementedRegistryServiceServer
	reg   *registry.Registry
	check func(ctx context.Context, usesResources map[string][]string) []string
}

// NewRegistry returns the registry service. check, when set, reports what a
// runner's uses_resources declarations raise against registered workflows.
func NewRegistry(reg *registry.Registry, check func(ctx context.Context, usesResources map[string][]string) []string) *Registry {
	return &Registry{reg: reg, check: check}
}

// Leases are clamped: long enough to survive a hiccup, short enough that a
// dead runner stops getting steps soon.
const (
	minLease     = 2 * time.Second
	maxLease     = 5 * time.Minute
	defaultLease = 15 * time.Second
)

func clampLease(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return defaultLease
	case d < minLease:
		return minLease
	case d > maxLease:
		return maxLease
	}
	return d
}

func (s *Registry) Register(ctx context.Context, req *realmv1.RegisterRequest) (*realmv1.RegisterResponse, error) {
	if req.GetEndpoint() == "" {
		return nil, status.Error(codes.InvalidArgument, "endpoint is required")
	}
	if len(req.GetHandlers()) == 0 && len(req.GetAdapters()) == 0 && len(req.GetAdapterSpecs()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "a runner must serve at least one handler or adapter")
	}
	seen := map[string]bool{}
	r := registry.Runner{Name: req.GetRunnerName(), Endpoint: req.GetEndpoint()}
	var err error
	if r.Adapters, r.AdapterSpecs, err = adapterSpecs(req); err != nil {
		return nil, err
	}
	if err := mayServe(ctx, r.Adapters, req); err != nil {
		return nil, err
	}
	if id, ok := mtls.FromContext(ctx); ok {
		r.Owner = id.Name
	}
	for _, h := range req.GetHandlers() {
		if h.GetName() == "" {
			return nil, status.Error(codes.InvalidArgument, "a handler needs a name")
		}
		if seen[h.GetName()] {
			return nil, status.Errorf(codes.InvalidArgument, "handler '%s' is declared twice by this runner; names must be unique", h.GetName())
		}
		seen[h.GetName()] = true
		r.Handlers = append(r.Handlers, registry.Handler{Name: h.GetName(), UsesResources: h.GetUsesResources()})
	}
	lease := clampLease(req.GetLease().AsDuration())
	got, err := s.reg.Register(ctx, r, lease)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &realmv1.RegisterResponse{RunnerId: got.ID, LeaseExpiresAt: timestamppb.New(got.Expires)}
	if s.check != nil {
		uses := map[string][]string{}
		for _, h := range r.Handlers {
			if len(h.UsesResources) > 0 {
				uses[h.Name] = h.UsesResources
			}
		}
		if len(uses) > 0 {
			resp.Warnings = s.check(ctx, uses)
		}
	}
	return resp, nil
}

func (s *Registry) Renew(ctx context.Context, req *realmv1.RenewRequest) (*realmv1.RenewResponse, error) {
	if err := s.owns(ctx, "Renew", req.GetRunnerId()); err != nil {
		return nil, err
	}
	// The runner's own lease, as registered (and clamped then).
	exp, err := s.reg.Renew(ctx, req.GetRunnerId(), defaultLease)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, status.Error(codes.NotFound, "runner is not registered (its lease ran out): register again")
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &realmv1.RenewResponse{LeaseExpiresAt: timestamppb.New(exp)}, nil
}

func (s *Registry) Deregister(ctx context.Context, req *realmv1.DeregisterRequest) (*realmv1.DeregisterResponse, error) {
	if err := s.owns(ctx, "Deregister", req.GetRunnerId()); err != nil {
		return nil, err
	}
	if err := s.reg.Deregister(ctx, req.GetRunnerId()); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &realmv1.DeregisterResponse{}, nil
}

func (s *Registry) ListCapabilities(ctx context.Context, _ *realmv1.ListCapabilitiesRequest) (*realmv1.ListCapabilitiesResponse, error) {
	live, err := s.reg.Live(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &realmv1.ListCapabilitiesResponse{}
	for _, r := range live {
		info := &realmv1.RunnerInfo{RunnerId: r.ID, RunnerName: r.Name, Endpoint: r.Endpoint, Adapters: r.Adapters, LeaseExpiresAt: timestamppb.New(r.Expires)}
		for _, a := range r.AdapterSpecs {
			info.AdapterSpecs = append(info.AdapterSpecs, &realmv1.AdapterSpec{Name: a.Name, ConfigSchemaJson: a.ConfigSchema})
		}
		for _, h := range r.Handlers {
			info.Handlers = append(info.Handlers, &realmv1.HandlerSpec{Name: h.Name, UsesResources: h.UsesResources})
		}
		resp.Runners = append(resp.Runners, info)
	}
	return resp, nil
}

// adapterSpecs reads a registration's adapters: the names, and the specs
// when the runner sent them (it names each adapter in both; one named in a
// spec only is served all the same). A config_schema that does not compile
// is refused here, so no workflow is checked against it.
func adapterSpecs(req *realmv1.RegisterRequest) ([]string, []registry.AdapterSpec, error) {
	names := slices.Clone(req.GetAdapters())
	var specs []registry.AdapterSpec
	for _, a := range req.GetAdapterSpecs() {
		name := a.GetName()
		if name == "" {
			return nil, nil, status.Error(codes.InvalidArgument, "an adapter spec needs a name")
		}
		if slices.ContainsFunc(specs, func(s registry.AdapterSpec) bool { return s.Name == name }) {
			return nil, nil, status.Errorf(codes.InvalidArgument, "adapter '%s' has two specs in this registration; names must be unique", name)
		}
		if text := a.GetConfigSchemaJson(); text != "" {
			if _, err := engine.CompileConfigSchema(text); err != nil {
				return nil, nil, status.Errorf(codes.InvalidArgument, "adapter '%s' declares a config_schema realm cannot use: %s. Nothing was registered.", name, strings.TrimSuffix(err.Error(), "."))
			}
		}
		specs = append(specs, registry.AdapterSpec{Name: name, ConfigSchema: a.GetConfigSchemaJson()})
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names, specs, nil
}

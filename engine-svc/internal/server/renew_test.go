package server_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A renewal grants the lease the runner registered with: a runner that
// asked for two minutes and renews every forty seconds (a third, as the
// runner SDK does) is never dropped between renewals.
func TestRenewGrantsTheRegisteredLease(t *testing.T) {
	t.Parallel()
	e := setup(t, "miniredis")
	for _, tc := range []struct {
		asked, want time.Duration
	}{
		{asked: 2 * time.Minute, want: 2 * time.Minute},
		{asked: 0, want: 15 * time.Second},               // the default
		{asked: time.Hour, want: 5 * time.Minute},        // clamped when registered
		{asked: time.Millisecond, want: 2 * time.Second}, // clamped when registered
	} {
		reg, err := e.registry.Register(ctx(t), &realmv1.RegisterRequest{Endpoint: "127.0.0.1:1", RunnerName: "leased",
			Lease: durationpb.New(tc.asked), Handlers: []*realmv1.HandlerSpec{{Name: "h"}}})
		if err != nil {
			t.Fatal(err)
		}
		before := e.clock.Now()
		resp, err := e.registry.Renew(ctx(t), &realmv1.RenewRequest{RunnerId: reg.GetRunnerId()})
		if err != nil {
			t.Fatal(err)
		}
		got := resp.GetLeaseExpiresAt().AsTime().Sub(before)
		if got < tc.want-time.Second || got > tc.want+time.Second {
			t.Errorf("asked %v: a renewal runs %v, want %v", tc.asked, got.Round(time.Second), tc.want)
		}
	}
}

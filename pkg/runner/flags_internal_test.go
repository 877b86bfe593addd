package runner

import (
	"bytes"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRunnerFlagsFallBackToTheEnvironment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    Flags
		wantErr string
	}{
		{name: "the defaults",
			want: Flags{Options: Options{Name: "shop", EngineAddr: DefaultEngineAddr, Listen: DefaultListen, Lease: DefaultLease, ShutdownTimeout: DefaultShutdownTimeout}}},
		{name: "the environment when a flag is not given",
			env: map[string]string{EngineAddrEnv: "engine-svc:7070", ShutdownTimeoutEnv: "3s", MetricsAddrEnv: ":9090",
				NameEnv: "pod-runner", ListenEnv: "0.0.0.0:7072", AdvertiseEnv: "10.0.0.1:7072", ManifestEnv: "realm.yaml"},
			want: Flags{Options: Options{Name: "pod-runner", EngineAddr: "engine-svc:7070", Listen: "0.0.0.0:7072", Advertise: "10.0.0.1:7072",
				Lease: DefaultLease, ShutdownTimeout: 3 * time.Second, MetricsAddr: ":9090"}, Manifest: "realm.yaml"}},
		{name: "a flag given wins over the environment",
			env:  map[string]string{EngineAddrEnv: "engine-svc:7070", ShutdownTimeoutEnv: "3s"},
			args: []string{"-engine-addr", "127.0.0.1:9", "-shutdown-timeout=1m", "-lease", "30s"},
			want: Flags{Options: Options{Name: "shop", EngineAddr: "127.0.0.1:9", Listen: DefaultListen, Lease: 30 * time.Second, ShutdownTimeout: time.Minute}}},
		{name: "an environment value the flag refuses is an error",
			env:     map[string]string{ShutdownTimeoutEnv: "soon"},
			wantErr: `REALM_SHUTDOWN_TIMEOUT="soon" is no value for -shutdown-timeout`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("shop", flag.ContinueOnError)
			f := Flags{Options: Options{Name: "shop"}}
			err := registerFlags(fs, &f, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f, tt.want) {
				t.Errorf("flags = %+v\nwant    %+v", f, tt.want)
			}
		})
	}
}

// The help names each flag's environment variable and shows the built-in
// default even when the variable is set.
func TestRunnerFlagsHelpNamesTheEnvironment(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("shop", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	if err := registerFlags(fs, &Flags{}, func(k string) string {
		return map[string]string{EngineAddrEnv: "elsewhere:1"}[k]
	}); err != nil {
		t.Fatal(err)
	}
	fs.PrintDefaults()
	for _, want := range []string{
		"-engine-addr string\n    \tengine-svc's gRPC address (env REALM_ENGINE_ADDR) (default \"127.0.0.1:7070\")",
		"(env REALM_METRICS_LISTEN)", "(env REALM_SHUTDOWN_TIMEOUT) (default 10s)", "-manifest string",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help does not contain %q:\n%s", want, out.String())
		}
	}
}

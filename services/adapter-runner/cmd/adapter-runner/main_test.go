package main

import (
	"flag"
	"io"
	"maps"
	"slices"
	"testing"

	"github.com/realm-go/realm/pkg/runner"
)

func parse(t *testing.T, args ...string) (settings, error) {
	t.Helper()
	var s settings
	fs := flag.NewFlagSet("adapter-runner", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s.define(fs)
	return s, fs.Parse(args)
}

func TestWithoutAFilesystemRootThereIsNoFilesystemAdapter(t *testing.T) {
	t.Parallel()
	s, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	adps, err := build(&runner.Flags{}, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(adps)); !slices.Equal(got, []string{"http"}) {
		t.Errorf("adapters = %v, want only http (the working folder is not a default root)", got)
	}
}

func TestTheHostFlagsAreReadIntoTheirAllowances(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		allow   []string
		secrets map[string][]string
		wantErr bool
	}{
		{"repeated and comma-separated", []string{"-allow-host", "ledger.internal", "-allow-host", "10.0.0.5:8443,[::1]:80"}, []string{"ledger.internal", "10.0.0.5:8443", "[::1]:80"}, nil, false},
		{"a secret bound to hosts", []string{"-secret-host", "REALM_SECRET_GH=api.github.com,uploads.github.com"}, nil, map[string][]string{"REALM_SECRET_GH": {"api.github.com", "uploads.github.com"}}, false},
		{"a URL is not a host", []string{"-allow-host", "http://10.0.0.5/"}, nil, nil, true},
		{"a secret without hosts", []string{"-secret-host", "REALM_SECRET_GH"}, nil, nil, true},
		{"an empty host", []string{"-secret-host", "REALM_SECRET_GH=a.example,"}, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := parse(t, tt.args...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !slices.Equal(s.allowHosts, tt.allow) || !maps.EqualFunc(s.secretHosts, tt.secrets, slices.Equal) {
				t.Errorf("allow %v secrets %v, want %v %v", s.allowHosts, s.secretHosts, tt.allow, tt.secrets)
			}
		})
	}
}

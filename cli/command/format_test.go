package command

import (
	"os"
	"testing"
	"time"
)

func TestAge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0m"},
		{-time.Minute, "0m"},
		{59*time.Minute + 59*time.Second, "59m"},
		{89 * time.Minute, "1h 29m"},
		{48*time.Hour + 10*time.Minute, "2d 0h"},
		{24*time.Hour + 5*time.Hour, "1d 5h"},
	}
	for _, tt := range tests {
		if got := age(tt.in); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * 24 * time.Hour, true},
		{"6h", 6 * time.Hour, true},
		{"10m", 10 * time.Minute, true},
		{"0m", 0, true},
		{"0", 0, false},
		{"1.5h", 0, false},
		{"-1h", 0, false},
		{"10s", 0, false},
		{"99999999999999999999d", 0, false},
	}
	for _, tt := range tests {
		got, err := parseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestLocalTimeIsEnUSInTheGivenZone(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 10, 1, 23, 52, 37, 0, time.UTC)
	if got := localTime(at, time.FixedZone("CEST", 2*3600)); got != "10/2/2026, 1:52:37 AM" {
		t.Errorf("localTime = %q", got)
	}
}

// Not parallel: it changes the process environment.
func TestLoadDotEnvNeverOverridesTheEnvironment(t *testing.T) {
	path := t.TempDir() + "/custom.env"
	writeFile(t, path, "REALM_TEST_DOTENV_NEW=from-file\nREALM_TEST_DOTENV_SET=from-file\n")
	t.Setenv("DOTENV_CONFIG_PATH", path)
	t.Setenv("REALM_TEST_DOTENV_SET", "from-env")
	t.Setenv("REALM_TEST_DOTENV_NEW", "") // registers cleanup; unset below
	os.Unsetenv("REALM_TEST_DOTENV_NEW")
	if err := LoadDotEnv(); err != nil {
		t.Fatal(err)
	}
	if got := os.Getenv("REALM_TEST_DOTENV_NEW"); got != "from-file" {
		t.Errorf("new key = %q, want it added from the file", got)
	}
	if got := os.Getenv("REALM_TEST_DOTENV_SET"); got != "from-env" {
		t.Errorf("set key = %q, want the environment's value kept", got)
	}
	t.Setenv("DOTENV_CONFIG_PATH", t.TempDir()+"/missing.env")
	if err := LoadDotEnv(); err != nil {
		t.Errorf("missing file: %v, want no error", err)
	}
}

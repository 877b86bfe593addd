// Package version holds the release string every Realm binary reports.
//
// It is its own tiny package so that a service can print its version
// without linking the command line or anything else: the Makefile and each
// Dockerfile stamp it with
//
//	-ldflags "-X github.com/realm-go/realm/pkg/version.Version=<v>"
package version

// Version is the release this binary was built from; "0.0.0-dev" when it
// was built without the stamp (go run, go test).
var Version = "0.0.0-dev"

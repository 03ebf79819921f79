// Package buildinfo says which Strom a binary is: its version and commit,
// set at link time,
//
//	go build -ldflags "-X strom/internal/buildinfo.version=v0.2.0 -X strom/internal/buildinfo.commit=$(git rev-parse HEAD)"
//
// or else read from the build's own information (the module version of
// `go install strom@v…`, the VCS revision Go records when it builds a
// checkout with -buildvcs).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set by -ldflags -X; empty unless given.
var (
	version string
	commit  string
)

// devVersion is the version of a build that names none.
const devVersion = "0.1.0-dev"

// Version returns the Strom version: the -ldflags one, else the module's
// version when built as a dependency or with `go install`, else 0.1.0-dev.
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return devVersion
}

// Commit returns the commit the binary was built from: the -ldflags one,
// else the VCS revision Go recorded (with "-dirty" when the tree had
// changes), else "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev + dirty
}

// GoVersion returns the Go version the binary was built with.
func GoVersion() string { return runtime.Version() }

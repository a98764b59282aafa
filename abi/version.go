package abi

import (
	"runtime/debug"
	"strings"
)

// BuildVersion returns the version of the running program as its build
// recorded it (runtime/debug.ReadBuildInfo), for --version and a
// device's hello: the main module's version ("devel" when the build
// recorded none), then, in parentheses, the VCS revision (its first 12
// digits, "+dirty" when the work tree had changes), the commit's time and
// the Go version, e.g.
//
//	v0.0.0-20251126141100-16cc0e4abcde+dirty (16cc0e4abcde+dirty, 2025-11-26T14:11:00Z, go1.26.0)
//
// A part the build did not record is left out; `go build` in a clone
// records them all, `go test` binaries none but the Go version.
func BuildVersion() string {
	info, ok := debug.ReadBuildInfo()
	return buildVersion(info, ok)
}

// buildVersion is BuildVersion of the build info info (ok false: none).
func buildVersion(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "devel (no build info)"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, when string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	var parts []string
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		parts = append(parts, rev)
	}
	if when != "" {
		parts = append(parts, when)
	}
	if info.GoVersion != "" {
		parts = append(parts, info.GoVersion)
	}
	if len(parts) == 0 {
		return v
	}
	return v + " (" + strings.Join(parts, ", ") + ")"
}

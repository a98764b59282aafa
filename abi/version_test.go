package abi

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"none", nil, false, "devel (no build info)"},
		{"go test", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, true, "devel (go1.26.0)"},
		{"clean tag", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
			Settings: vcs("vcs.revision", "16cc0e4abcdef0123456789", "vcs.time", "2025-11-26T14:11:00Z", "vcs.modified", "false")}, true,
			"v1.2.3 (16cc0e4abcde, 2025-11-26T14:11:00Z, go1.26.0)"},
		{"dirty tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20251126141100-16cc0e4abcde+dirty"},
			Settings: vcs("vcs.revision", "16cc0e4abcdef0123456789", "vcs.modified", "true")}, true,
			"v0.0.0-20251126141100-16cc0e4abcde+dirty (16cc0e4abcde+dirty, go1.26.0)"},
		{"nothing recorded", &debug.BuildInfo{}, true, "devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildVersion(tt.info, tt.ok); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if v := BuildVersion(); v == "" || strings.Contains(v, "\n") {
		t.Errorf("BuildVersion() = %q, want one line", v)
	}
}

package abi

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzSpawnArgs: any request's args decode into SpawnArgs or are a 400;
// the seed's fields of what decodes check as a 400 or a 501 (not built
// yet), never a panic; a workspace's mode alone and its object agree.
func FuzzSpawnArgs(f *testing.F) {
	for _, s := range []string{
		`{"profile":"task","workspace":"none"}`,
		`{"profile":"task","workspace":{"mode":"new","label":"w","kind":"thread"}}`,
		`{"profile":"task","workspace":{"mode":"attach","workspaceId":"w"}}`,
		`{"profile":"task","workspace":{"mode":"attach","workspaceId":"w","branch":"try"}}`,
		`{"profile":"task","workspace":{"mode":"attach"}}`,
		`{"profile":"task","workspace":{"mode":"inherit","x":1}}`,
		`{"profile":"task","workspace":7}`,
		`{"profile":"task","assignment":{"contextFiles":[{"name":"a","text":"b"}],"autoStart":true}}`,
		`{"profile":"task","assignment":{"contextFiles":[{"name":"a\n","text":"b"},{"name":"a","text":"\xff"}]}}`,
		`{"profile":"task","mounts":[{"kind":"package-source","packageId":"p"}]}`,
		`{"profile":"task","mounts":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a SpawnArgs
		if err := DecodeArgs(b, &a); err != nil {
			if KindOf(err) != Invalid {
				t.Fatalf("DecodeArgs(%q): %v, want a 400", b, err)
			}
			return
		}
		for _, err := range []error{a.Workspace.Check(), a.Assignment.Check(), CheckSpawnMounts(a.Mounts)} {
			if err != nil && KindOf(err) != Invalid && KindOf(err) != NotImplemented {
				t.Fatalf("%q: %v, want a 400 or a 501", b, err)
			}
			if KindOf(err) == NotImplemented && !strings.Contains(err.Error(), "not supported yet: ") {
				t.Fatalf("%q: a 501 that does not say so: %v", b, err)
			}
		}
		if a.Workspace != nil {
			m, _ := json.Marshal(a.Workspace.Mode)
			var w WorkspaceSpec
			if err := json.Unmarshal(m, &w); err != nil || w.Mode != a.Workspace.Mode {
				t.Fatalf("mode %q alone decodes to %+v, %v", a.Workspace.Mode, w, err)
			}
		}
	})
}

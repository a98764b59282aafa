package codemode

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestModules: a request's modules are pkg.<name> in the block, each its
// source's module.exports (run once, on first use, with the block's
// globals); a module that throws fails the uses of it, naming it; no
// module, no pkg.<name>; no modules, no pkg.
func TestModules(t *testing.T) {
	mods := []Module{
		{Name: "changelog", Source: `let n = 0; exports.count = () => ++n; exports.title = (v) => "Release " + v;`},
		{Name: "whole", Source: `module.exports = { add: (a, b) => a + b };`},
		{Name: "caller", Source: `exports.who = async () => (await shell("whoami")).output;`},
		{Name: "broken", Source: `throw new Error("boom");`},
	}
	call := func(_ context.Context, name string, _ json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"output":"alice"}`), nil
	}
	for _, tc := range []struct {
		code, want, fails string
	}{
		{code: `return pkg.changelog.title("1.2")`, want: `"Release 1.2"`},
		{code: `pkg.changelog.count(); return pkg.changelog.count()`, want: `2`},
		{code: `return pkg.whole.add(2, 3)`, want: `5`},
		{code: `return await pkg.caller.who()`, want: `"alice"`},
		{code: `return Object.keys(pkg)`, want: `["changelog","whole","caller","broken"]`},
		{code: `return pkg.broken.x`, fails: "pkg.broken: Error: boom"},
		{code: `return typeof pkg.nothing`, want: `"undefined"`},
	} {
		res := run(t, Request{Code: tc.code, Modules: mods}, call)
		if tc.fails != "" {
			if res.Status != StatusFailed || !strings.Contains(res.Error, tc.fails) {
				t.Errorf("%s: %s %q, want failed %q", tc.code, res.Status, res.Error, tc.fails)
			}
			continue
		}
		completed(t, res, tc.want)
	}
	completed(t, run(t, Request{Code: `return typeof pkg`}, nil), `"undefined"`)
}

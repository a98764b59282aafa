package houserules

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const mod = "gsvfs.dev/gsvfs"

// pkg is what go list says of one package or test variant.
type pkg struct {
	ImportPath string
	ForTest    string
	Deps       []string
}

// base is a package path without go list's test-variant suffix
// ("p [q.test]" is p); "p_test" (an external test package) is p.
func base(p string) string {
	p, _, _ = strings.Cut(p, " ")
	return strings.TrimSuffix(p, "_test")
}

// rel is p relative to the module ("kernel/kerneltest"), or "" if p is
// not the module's.
func rel(p string) string {
	if r, ok := strings.CutPrefix(p, mod+"/"); ok {
		return r
	}
	return ""
}

// under reports whether the module-relative path p is one of roots or
// inside one.
func under(p string, roots ...string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// rule is one import rule: the packages it binds and what they may not
// depend on: forbid judges the module's packages (module-relative paths),
// external, if set, every other (full import paths).
type rule struct {
	name     string
	binds    func(p string) bool
	forbid   func(self, dep string, test bool) bool
	external func(dep string, test bool) bool
}

// rooms are the rooms: each one part of the system, registered with the
// namespace (ns.Room), meeting the others only in the dispatcher.
var rooms = []string{"proc", "ipc", "sched", "devices", "notify", "mcp", "repos", "adapters", "pkgs"}

// wiring reports whether the tests of self may stand the room dep up, as
// gsvfs does, to reach it through the dispatcher: the devices room (the
// real data tree, exec sessions) for the tests of proc, ipc, sched and
// mcp; the ipc room for
// proc's (processes that talk); the process room for ipc's (the
// processes that talk, their model scripted).
func wiring(self, dep string) bool {
	switch {
	case under(self, "pkgs"):
		// The package room's tests install into the rooms a package
		// adds to: repositories, sessions, schedules, MCP, profiles.
		return under(dep, "repos", "devices", "sched", "mcp", "proc")
	case under(dep, "devices"):
		return under(self, "proc", "ipc", "sched", "mcp", "adapters")
	case under(dep, "ipc"):
		return under(self, "proc")
	case under(dep, "proc"):
		return under(self, "ipc", "adapters")
	}
	return false
}

var rules = []rule{
	{
		// The web console is a transport: it meets the system only in
		// abi and the kernel's connection API (Authenticate, Call,
		// Subscribe), as the 9P transport meets it in vfs.
		name:  "web imports of GSV only abi and the kernel",
		binds: func(p string) bool { return under(p, "web") },
		forbid: func(_, dep string, test bool) bool {
			return (!under(dep, "web", "abi", "kernel") && !(test && dep == "internal/pgtest")) || (!test && under(dep, "kernel/kerneltest"))
		},
	},
	{
		name:  "the kernel imports no vfs, transport, namespace or room",
		binds: func(p string) bool { return p == "kernel" || p == "kernel/kerneltest" },
		forbid: func(_, dep string, _ bool) bool {
			return under(dep, append([]string{"vfs", "ninep", "ns"}, rooms...)...)
		},
	},
	{
		name:   "vfs, vfs/... and ninep import nothing of GSV",
		binds:  func(p string) bool { return under(p, "vfs", "ninep") },
		forbid: func(_, dep string, _ bool) bool { return !under(dep, "vfs", "ninep") },
	},
	{
		name:  "the rooms (proc, ipc, sched, devices, notify, mcp, repos, adapters, pkgs) never import each other",
		binds: func(p string) bool { return under(p, rooms...) },
		forbid: func(self, dep string, test bool) bool {
			if test && wiring(self, dep) {
				return false
			}
			for _, room := range rooms {
				if under(dep, room) && !under(self, room) {
					return true
				}
			}
			return false
		},
	},
	{
		// The local device is what a device daemon links: it reaches the
		// kernel only through its Host, which the router gives.
		name:  "devices/local links no kernel and no SQLite",
		binds: func(p string) bool { return under(p, "devices/local") },
		forbid: func(_, dep string, test bool) bool {
			return !test && under(dep, "kernel")
		},
		external: func(dep string, test bool) bool {
			return !test && (dep == "modernc.org/sqlite" || strings.HasPrefix(dep, "modernc.org/sqlite/"))
		},
	},
	{
		// The device side of a remote device is what the device daemon
		// links on a machine without the kernel: its tree and its
		// syscalls, over abi, vfs and the local device's code. Its tests
		// stand up no kernel either (a 9P server and client only).
		name:  "devices/export links no kernel and no SQLite",
		binds: func(p string) bool { return under(p, "devices/export") },
		forbid: func(_, dep string, test bool) bool {
			return under(dep, "kernel")
		},
		external: func(dep string, test bool) bool {
			return dep == "modernc.org/sqlite" || strings.HasPrefix(dep, "modernc.org/sqlite/")
		},
	},
	{
		// The namespace is built on the kernel's dispatcher and the vfs
		// node types only. Its tests stand the kernel up (kerneltest)
		// and check what the transports (vfs/..., ninep) serve of it.
		name:  "ns imports of GSV only kernel, abi (and its schemas) and vfs",
		binds: func(p string) bool { return p == "ns" },
		forbid: func(_, dep string, test bool) bool {
			if test && (dep == "kernel/kerneltest" || dep == "internal/pgtest" || under(dep, "vfs", "ninep")) {
				return false
			}
			return dep != "kernel" && dep != "abi" && dep != "abi/schema" && dep != "vfs"
		},
	},
	{
		// The CLI speaks the ABI: request frames and their records, and
		// 9P (ninep's client, with the vfs that ninep imports) for
		// mounts; never the kernel, the namespace or a room.
		name:  "cmd/gsv imports of GSV only abi (and ninep's client)",
		binds: func(p string) bool { return p == "cmd/gsv" },
		forbid: func(_, dep string, _ bool) bool {
			return dep != "abi" && dep != "ninep" && dep != "vfs"
		},
	},
	{
		// The MCP server is a transport onto the dispatcher: it makes
		// syscalls through a Caller (a 9P connection's /sys/rpc, or the
		// kernel's Serve that gsvfs gives it), by abi descriptors with
		// abi/schema's schemas; it knows no kernel, namespace or room.
		// Its tests serve a vfs tree over ninep.
		name:  "mcpserve imports of GSV only abi (and its schemas) and ninep's client",
		binds: func(p string) bool { return p == "mcpserve" },
		forbid: func(_, dep string, test bool) bool {
			if test && dep == "vfs/vfstest" {
				return false
			}
			return dep != "abi" && dep != "abi/schema" && dep != "ninep" && dep != "vfs"
		},
	},
	{
		// CodeMode is a library: it runs a JavaScript block in a worker
		// process and serves its nested calls through a function it is
		// given. It knows no kernel, namespace, vfs or room, and links
		// no SQLite, so that anything (a room, a device daemon) can run
		// blocks. Its tests need nothing of GSV either.
		name:   "codemode imports nothing of GSV and no SQLite",
		binds:  func(p string) bool { return under(p, "codemode") },
		forbid: func(_, dep string, _ bool) bool { return true },
		external: func(dep string, _ bool) bool {
			return dep == "modernc.org/sqlite" || strings.HasPrefix(dep, "modernc.org/sqlite/")
		},
	},
	{
		// The schemas of the abi types: the abi and the schema
		// library, nothing else of GSV (the namespace, the agent's
		// tools and the MCP server import it).
		name:   "abi/schema imports of GSV only abi",
		binds:  func(p string) bool { return p == "abi/schema" },
		forbid: func(_, dep string, _ bool) bool { return dep != "abi" },
	},
	{
		// A bridge is a separate process speaking to the kernel through
		// a Caller (a 9P connection's /sys/rpc, which gsvfs gives it):
		// it knows no kernel, namespace or room.
		name:   "adapters/bridge imports of GSV only abi",
		binds:  func(p string) bool { return under(p, "adapters/bridge") },
		forbid: func(_, dep string, _ bool) bool { return dep != "abi" },
	},
	{
		name:   "abi imports nothing of GSV",
		binds:  func(p string) bool { return p == "abi" },
		forbid: func(_, dep string, _ bool) bool { return true },
	},
}

// TestImportRules lists every package of the module with its tests and
// checks each rule against every package, test variant and external
// test package it binds.
func TestImportRules(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-test", "-json=ImportPath,ForTest,Deps", mod+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list listed no packages")
	}
	for _, r := range rules {
		bad := map[string]map[string]bool{} // package -> forbidden deps
		for _, p := range pkgs {
			if strings.HasSuffix(p.ImportPath, ".test") {
				continue // the generated test main
			}
			self := rel(base(p.ImportPath))
			test := p.ForTest != "" || strings.HasSuffix(strings.Fields(p.ImportPath)[0], "_test")
			if self == "" || !r.binds(self) {
				continue
			}
			for _, d := range p.Deps {
				dep := rel(base(d))
				if dep == "" {
					if dep = base(d); r.external == nil || !r.external(dep, test) {
						continue
					}
				} else if dep == self || !r.forbid(self, dep, test) {
					continue
				}
				if bad[p.ImportPath] == nil {
					bad[p.ImportPath] = map[string]bool{}
				}
				bad[p.ImportPath][dep] = true
			}
		}
		var lines []string
		for p, deps := range bad {
			var ds []string
			for d := range deps {
				ds = append(ds, d)
			}
			sort.Strings(ds)
			lines = append(lines, p+" -> "+strings.Join(ds, ", "))
		}
		sort.Strings(lines)
		if len(lines) > 0 {
			t.Errorf("%s; broken by:\n\t%s", r.name, strings.Join(lines, "\n\t"))
		}
	}
}

package devices

import (
	"context"
	"fmt"
	"slices"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// Device is what the router needs of a device: the routable syscalls,
// each taking the caller (as local.Who) and its abi args and returning
// its abi result. A result whose OK is false is the operation's own
// failure; an error is the call's.
type Device interface {
	Read(ctx context.Context, who local.Who, a *abi.FSReadArgs) (*abi.FSReadResult, error)
	Write(ctx context.Context, who local.Who, a *abi.FSWriteArgs) (*abi.FSWriteResult, error)
	Edit(ctx context.Context, who local.Who, a *abi.FSEditArgs) (*abi.FSEditResult, error)
	Delete(ctx context.Context, who local.Who, a *abi.FSDeleteArgs) (*abi.FSDeleteResult, error)
	Search(ctx context.Context, who local.Who, a *abi.FSSearchArgs) (*abi.FSSearchResult, error)
	Exec(ctx context.Context, who local.Who, a *abi.ShellExecArgs) (*abi.ShellExecResult, error)
}

var _ Device = (*local.Device)(nil)

// Routable are the syscalls a target routes: the seed's fs.* tools and
// shell.exec.
var Routable = []string{"fs.read", "fs.write", "fs.edit", "fs.delete", "fs.search", "shell.exec"}

// entry is one device the router knows: its record as the seed's checks
// read it and, while it is connected, its driver.
type entry struct {
	owner      uint32   // the owner's uid
	groups     []uint32 // groups granted access
	online     bool
	implements []string // the syscalls it serves
	dev        Device   // nil: no live connection
}

// Options configure the router and its local device.
type Options struct {
	Local local.Options
	// Space, if set, is the namespace the router's files are bound in:
	// with it, Mounts binds the files of exec sessions too (/dev/gsv,
	// /var/blobs/sha256; see devtree.go).
	Space *ns.Space
}

// Router routes the routable syscalls to devices. It is an ns.Room: its
// syscalls, the data tree's mounts (/home, /workspaces, /var/sessions),
// the files of exec sessions (/dev/gsv, /var/blobs/sha256) and a Close
// that ends the local device's commands.
type Router struct {
	k       *kernel.Kernel
	space   *ns.Space // nil: no files of exec sessions
	local   *local.Device
	devices map[string]*entry // by device id; the local device is not here
}

var _ ns.Room = (*Router)(nil)

// New returns the router of k with its local device (see local.New), which
// makes each new user's home in the transaction that adds the user. Every
// device of the registry is offline at first: no connection of a device
// outlives the router.
func New(k *kernel.Kernel, opts Options) (*Router, error) {
	if err := k.Store.Migrate("devices", migrations); err != nil {
		return nil, err
	}
	if err := offlineAll(context.Background(), k.Store); err != nil {
		return nil, err
	}
	d, err := openLocal(k, opts.Local)
	if err != nil {
		return nil, err
	}
	return &Router{k: k, space: opts.Space, local: d, devices: map[string]*entry{}}, nil
}

// Local returns the local device.
func (r *Router) Local() *local.Device { return r.local }

// SetRoot gives the local device the namespace root, which its fs.*
// calls walk for paths outside the data tree; call it once ns.New has
// made the namespace.
func (r *Router) SetRoot(root vfs.Dir) { r.local.SetRoot(root) }

// EndCommands ends the local device's shell commands (local.Device.EndCommands).
func (r *Router) EndCommands() { r.local.EndCommands() }

// Syscalls implements ns.Room: the routable syscalls, the registry's
// (sys.device.*) and the local device's internal ones.
func (r *Router) Syscalls() []kernel.Syscall {
	calls := []kernel.Syscall{
		kernel.Fn("fs.read", 0, r.read),
		kernel.Fn("fs.write", 0, r.write),
		kernel.Fn("fs.edit", 0, r.edit),
		kernel.Fn("fs.delete", 0, r.delete),
		kernel.Fn("fs.search", 0, r.search),
		kernel.Fn("shell.exec", 0, r.exec),
	}
	calls = append(calls, r.sessionSyscalls()...)
	calls = append(calls, r.registrySyscalls()...)
	return append(calls, localSyscalls(r.local)...)
}

// Mounts implements ns.Room: the data tree's directories and, given the
// namespace, the files of exec sessions.
func (r *Router) Mounts() []ns.Mount {
	return append([]ns.Mount{
		{Path: "/home", Node: r.local.Node("home")},
		{Path: "/workspaces", Node: r.local.Node("workspaces")},
		{Path: "/var/sessions", Node: r.local.Node("var/sessions")},
	}, r.devMounts()...)
}

// Close implements ns.Room: it ends the local device's commands and
// closes its data tree.
func (r *Router) Close() error { return r.local.Close() }

// route returns the device that serves the syscall call for c at target,
// by the seed's checks in the seed's order: the caller's access to the
// device (its owner, a granted group, or root; 403), the device online
// (503), the syscall implemented (400), a live connection (503). A
// device the router does not know has no owner and is never online.
func (r *Router) route(c *kernel.Caller, call, target string) (Device, error) {
	if target == "" || target == abi.LocalTarget {
		return r.local, nil
	}
	e := r.devices[target]
	if e == nil {
		e = &entry{}
		if !c.IsRoot() {
			return nil, abi.E(abi.Path(target), abi.Permission, fmt.Sprintf("access denied to device %q", target))
		}
	}
	if !c.IsRoot() && c.Uid != e.owner && !slices.ContainsFunc(e.groups, c.InGroup) {
		return nil, abi.E(abi.Path(target), abi.Permission, fmt.Sprintf("access denied to device %q", target))
	}
	if !e.online {
		return nil, abi.E(abi.Path(target), abi.Offline, fmt.Sprintf("device %q is offline", target))
	}
	if !slices.Contains(e.implements, call) {
		return nil, abi.E(abi.Path(target), abi.Invalid, fmt.Sprintf("device %q does not implement %s", target, call))
	}
	if e.dev == nil {
		return nil, abi.E(abi.Path(target), abi.Offline, fmt.Sprintf("no active connection for device %q", target))
	}
	return e.dev, nil
}

// read is fs.read, routed.
func (r *Router) read(ctx context.Context, c *kernel.Caller, a *abi.FSReadArgs) (*abi.FSReadResult, error) {
	d, err := r.route(c, "fs.read", a.Target)
	if err != nil {
		return nil, err
	}
	return d.Read(ctx, whoOf(c), a)
}

// write is fs.write, routed.
func (r *Router) write(ctx context.Context, c *kernel.Caller, a *abi.FSWriteArgs) (*abi.FSWriteResult, error) {
	d, err := r.route(c, "fs.write", a.Target)
	if err != nil {
		return nil, err
	}
	return d.Write(ctx, whoOf(c), a)
}

// edit is fs.edit, routed.
func (r *Router) edit(ctx context.Context, c *kernel.Caller, a *abi.FSEditArgs) (*abi.FSEditResult, error) {
	d, err := r.route(c, "fs.edit", a.Target)
	if err != nil {
		return nil, err
	}
	return d.Edit(ctx, whoOf(c), a)
}

// delete is fs.delete, routed.
func (r *Router) delete(ctx context.Context, c *kernel.Caller, a *abi.FSDeleteArgs) (*abi.FSDeleteResult, error) {
	d, err := r.route(c, "fs.delete", a.Target)
	if err != nil {
		return nil, err
	}
	return d.Delete(ctx, whoOf(c), a)
}

// search is fs.search, routed.
func (r *Router) search(ctx context.Context, c *kernel.Caller, a *abi.FSSearchArgs) (*abi.FSSearchResult, error) {
	d, err := r.route(c, "fs.search", a.Target)
	if err != nil {
		return nil, err
	}
	return d.Search(ctx, whoOf(c), a)
}

// exec is shell.exec, routed.
func (r *Router) exec(ctx context.Context, c *kernel.Caller, a *abi.ShellExecArgs) (*abi.ShellExecResult, error) {
	d, err := r.route(c, "shell.exec", a.Target)
	if err != nil {
		return nil, err
	}
	return d.Exec(ctx, whoOf(c), a)
}

package devices

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

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
var Routable = []string{abi.FsRead.Name, abi.FsWrite.Name, abi.FsEdit.Name, abi.FsDelete.Name, abi.FsSearch.Name, abi.ShellExec.Name}

// Options configure the router and its local device.
type Options struct {
	Local local.Options
	// Space, if set, is the namespace the router's files are bound in:
	// with it, Mounts binds the files of exec sessions too (/dev/gsv,
	// /var/blobs/sha256; see devtree.go).
	Space *ns.Space
	// Logger receives the router's logs; nil means Local.Logger, else
	// slog.Default().
	Logger *slog.Logger
	// RouteTimeout is how long a routed fs.* call may take before its
	// caller gets 504; zero means DefaultRouteTimeout.
	RouteTimeout time.Duration
}

// Router routes the routable syscalls to devices. It is an ns.Room: its
// syscalls, the data tree's mounts (/home, /workspaces, /var/sessions),
// the files of exec sessions (/dev/gsv, /var/blobs/sha256) and a Close
// that ends the local device's commands.
type Router struct {
	k            *kernel.Kernel
	space        *ns.Space
	local        *local.Device
	log          *slog.Logger
	routeTimeout time.Duration

	mu          sync.Mutex
	remotes     map[string]*remoteDevice // the live connections, by device id
	shellRoutes map[string]shellRoute    // shell jobs running on devices, by job id
	procRoutes  map[string]shellRoute    // exec sessions opened on devices, by session id
	devDirs     map[string]vfs.Dir       // the /dev/<id> directories made
	slots       map[uint32]chan struct{} // the answer slots of each owner's devices (answers.go)
	holds       map[string]*hold         // the holds of devices that answered too much, by device id (answers.go)

	reg      devTable              // the registry and its access table, in memory (regmem.go)
	ownersMu sync.Mutex            // guards owners
	owners   map[uint32]ownerEntry // the Meta of device owners, as last read (regmem.go)

	closing   chan struct{} // closed by Close: device connections end
	closeOnce sync.Once
	wg        sync.WaitGroup // device connections and listeners
}

var _ ns.Room = (*Router)(nil)

// New returns the router of k with its local device (see local.New), which
// makes each new user's home in the transaction that adds the user. Every
// device of the registry is offline at first: no connection of a device
// outlives the router.
func New(k *kernel.Kernel, opts Options) (*Router, error) {
	if err := k.Store.Migrate("devices", migrations(k.Store.Dialect())); err != nil {
		return nil, err
	}
	if err := offlineAll(context.Background(), k.Store); err != nil {
		return nil, err
	}
	if err := openShellJobs(context.Background(), k.Store); err != nil {
		return nil, err
	}
	if err := openProcessSessions(context.Background(), k.Store); err != nil {
		return nil, err
	}
	if opts.Local.Quota == nil {
		opts.Local.Quota = (&quotas{k: k}).of // users' quotas from config
	}
	d, err := openLocal(k, opts.Local)
	if err != nil {
		return nil, err
	}
	k.ConfigRules(processCapRules()...)
	k.ConfigRules(maxDevicesRule)
	log := opts.Logger
	if log == nil {
		log = opts.Local.Logger
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Router{k: k, space: opts.Space, local: d, log: log, routeTimeout: opts.RouteTimeout,
		remotes: map[string]*remoteDevice{}, shellRoutes: map[string]shellRoute{}, procRoutes: map[string]shellRoute{}, devDirs: map[string]vfs.Dir{},
		closing: make(chan struct{})}
	if r.routeTimeout <= 0 {
		r.routeTimeout = DefaultRouteTimeout
	}
	if err := r.loadRegistry(context.Background()); err != nil {
		d.Close()
		return nil, err
	}
	return r, nil
}

// closed says whether Close has begun.
func (r *Router) closed() bool {
	select {
	case <-r.closing:
		return true
	default:
		return false
	}
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
	n := &changes{k: r.k}
	local := func(a string) bool { return a == "" || a == abi.LocalTarget }
	calls := []kernel.Syscall{
		kernel.Handle(abi.FsRead, r.read),
		kernel.Handle(abi.FsWrite, wrap(r.write, func(c *kernel.Caller, a *abi.FSWriteArgs, res *abi.FSWriteResult) {
			if res != nil {
				n.noteRouted(c, local(a.Target), res.OK, "write", res.Path)
			}
		})),
		kernel.Handle(abi.FsEdit, wrap(r.edit, func(c *kernel.Caller, a *abi.FSEditArgs, res *abi.FSEditResult) {
			if res != nil {
				n.noteRouted(c, local(a.Target), res.OK, "write", res.Path)
			}
		})),
		kernel.Handle(abi.FsDelete, wrap(r.delete, func(c *kernel.Caller, a *abi.FSDeleteArgs, res *abi.FSDeleteResult) {
			if res != nil {
				n.noteRouted(c, local(a.Target), res.OK, "remove", res.Path)
			}
		})),
		kernel.Handle(abi.FsSearch, r.search),
		kernel.Handle(abi.ShellExec, r.exec),
	}
	calls = append(calls, r.sessionSyscalls()...)
	calls = append(calls, r.registrySyscalls()...)
	return append(calls, localSyscalls(r.local, n)...)
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

// Close implements ns.Room: it ends the device connections and the local
// device's commands, and closes its data tree.
func (r *Router) Close() error {
	r.closeOnce.Do(func() { close(r.closing) })
	r.wg.Wait()
	return r.local.Close()
}

// route returns the device that serves the syscall call for c at target,
// by the seed's checks in the seed's order: the caller's access to the
// device (its owner, a granted group, or root; 403 "Access denied to
// device"), the device online (503 "Device offline"), the syscall
// implemented (400 "Device does not implement"), a live connection (503
// "No active connection"). A device with no record is denied to all but
// root, for whom it is offline.
func (r *Router) route(ctx context.Context, c *kernel.Caller, call, target string) (Device, error) {
	if target == "" || target == abi.LocalTarget {
		return r.local, nil
	}
	st, err := r.lookup(ctx, target)
	if err != nil && abi.KindOf(err) != abi.NotExist {
		return nil, err
	}
	var d *abi.Device
	if st != nil {
		d = st.dev
	}
	if d == nil || !mayUse(c, d, st.gids) {
		if d != nil || !c.IsRoot() {
			return nil, abi.E(abi.Path(target), abi.Permission, fmt.Sprintf("Access denied to device %q", target))
		}
		return nil, abi.E(abi.Path(target), abi.Offline, fmt.Sprintf("Device offline: %q", target))
	}
	if !d.Online {
		return nil, abi.E(abi.Path(target), abi.Offline, fmt.Sprintf("Device offline: %q", target))
	}
	if !slices.Contains(d.Implements, call) {
		return nil, abi.E(abi.Path(target), abi.Invalid, fmt.Sprintf("Device %q does not implement %s", target, call))
	}
	rd := r.remote(target)
	if rd == nil {
		return nil, abi.E(abi.Path(target), abi.Offline, fmt.Sprintf("No active connection for device %q", target))
	}
	return rd, nil
}

// read is fs.read, routed.
func (r *Router) read(ctx context.Context, c *kernel.Caller, a *abi.FSReadArgs) (*abi.FSReadResult, error) {
	d, err := r.route(ctx, c, abi.FsRead.Name, a.Target)
	if err != nil {
		return nil, err
	}
	return d.Read(ctx, whoOf(c), a)
}

// write is fs.write, routed.
func (r *Router) write(ctx context.Context, c *kernel.Caller, a *abi.FSWriteArgs) (*abi.FSWriteResult, error) {
	d, err := r.route(ctx, c, abi.FsWrite.Name, a.Target)
	if err != nil {
		return nil, err
	}
	return d.Write(ctx, whoOf(c), a)
}

// edit is fs.edit, routed.
func (r *Router) edit(ctx context.Context, c *kernel.Caller, a *abi.FSEditArgs) (*abi.FSEditResult, error) {
	d, err := r.route(ctx, c, abi.FsEdit.Name, a.Target)
	if err != nil {
		return nil, err
	}
	return d.Edit(ctx, whoOf(c), a)
}

// delete is fs.delete, routed.
func (r *Router) delete(ctx context.Context, c *kernel.Caller, a *abi.FSDeleteArgs) (*abi.FSDeleteResult, error) {
	d, err := r.route(ctx, c, abi.FsDelete.Name, a.Target)
	if err != nil {
		return nil, err
	}
	return d.Delete(ctx, whoOf(c), a)
}

// search is fs.search, routed.
func (r *Router) search(ctx context.Context, c *kernel.Caller, a *abi.FSSearchArgs) (*abi.FSSearchResult, error) {
	d, err := r.route(ctx, c, abi.FsSearch.Name, a.Target)
	if err != nil {
		return nil, err
	}
	return d.Search(ctx, whoOf(c), a)
}

// exec is shell.exec, routed. A call that continues a session (its
// sessionId, no target) goes where the session runs (see shellroute.go).
func (r *Router) exec(ctx context.Context, c *kernel.Caller, a *abi.ShellExecArgs) (*abi.ShellExecResult, error) {
	if a.SessionID != "" && a.Target == "" {
		if res, d, ok, err := r.continueRouted(ctx, c, a.SessionID); ok || err != nil {
			if err != nil || res != nil {
				return res, err
			}
			if a.Input != "" {
				// Input runs commands on the device's host, unsandboxed:
				// only under a capability that would let it start there.
				pc, err := r.processCap(ctx, c)
				if err != nil {
					return nil, err
				}
				if !local.HostWide(*pc, false) {
					return nil, abi.E(abi.Path(d.id), abi.Permission,
						"your process capability is narrower than a device's shell (which runs unsandboxed on the device): its input is refused")
				}
			}
			return r.execOn(ctx, c, d, a)
		}
	}
	d, err := r.route(ctx, c, abi.ShellExec.Name, a.Target)
	if err != nil {
		return nil, err
	}
	who := whoOf(c)
	if a.SessionID == "" || a.Input != "" {
		// A start obeys the caller's process capability; so does input
		// to a session, which runs commands (the device refuses it to a
		// caller allowed less than the start was). A poll goes on with
		// what its start was allowed.
		if who.Process, err = r.processCap(ctx, c); err != nil {
			if r.closed() { // the store may be gone: no start runs now
				return &abi.ShellExecResult{Error: "the daemon is shutting down"}, nil
			}
			return nil, err
		}
	}
	if rd, ok := d.(*remoteDevice); ok {
		if who.Process != nil && !local.HostWide(*who.Process, false) {
			return nil, abi.E(abi.Path(rd.id), abi.Permission,
				"your process capability is narrower than a device's shell (which runs unsandboxed on the device): open an exec session on it (process.session.open with target.device)")
		}
		return r.execOn(ctx, c, rd, a)
	}
	return d.Exec(ctx, who, a)
}

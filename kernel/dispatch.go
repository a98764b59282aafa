package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// Flags say how a syscall is called (abi.CallFlags).
type Flags = abi.CallFlags

const (
	// KernelOnly syscalls are refused (403) to every caller but the kernel
	// itself.
	KernelOnly = abi.KernelOnly
	// Internal syscalls take Go values, not JSON: they serve the namespace's
	// own nodes (the POSIX side of the data tree) and are unknown (400) to
	// request frames.
	Internal = abi.Internal
	// BeforeSetup syscalls may run while the system is not set up.
	BeforeSetup = abi.BeforeSetup
)

// Caller is who makes a syscall and from where.
type Caller struct {
	*Identity
	// Origin is the namespace directory the call came through (a ctl file's
	// directory), if any: its err view shows the call's failure.
	Origin string
}

type syscallDef struct {
	name   string
	flags  Flags
	grant  abi.Grant
	desc   abi.Desc
	decode func(json.RawMessage) (any, error)
	call   func(context.Context, *Caller, any) (any, error)
	// admit, if set, is the syscall's own rule on who may make it, checked
	// with the dispatcher's before anything runs.
	admit func(*Caller) error
}

// Syscall is one entry of a syscall table: a name, its flags, its
// handler and, optionally, its own rule on who may make it. A room gives
// its table to Register; make entries with Fn.
type Syscall struct{ def *syscallDef }

// Name returns the syscall's name.
func (s Syscall) Name() string { return s.def.name }

// Handle makes the table entry of the syscall d, served by fn: the
// name, grant and flags are d's. A request frame's JSON args are decoded
// strictly (DecodeArgs) into a fresh *A; in-process callers make it with
// Do.
func Handle[A any, R any](d abi.Call[A, R], fn func(ctx context.Context, c *Caller, args *A) (R, error)) Syscall {
	name := d.Name
	return Syscall{&syscallDef{
		name:  name,
		flags: d.Flags,
		grant: d.Grant,
		desc:  d,
		decode: func(raw json.RawMessage) (any, error) {
			a := new(A)
			if err := DecodeArgs(raw, a); err != nil {
				return nil, abi.E(abi.Op(name), err)
			}
			return a, nil
		},
		call: func(ctx context.Context, c *Caller, args any) (any, error) {
			switch a := args.(type) {
			case *A:
				return fn(ctx, c, a)
			case nil:
				return fn(ctx, c, new(A))
			}
			return nil, abi.E(abi.Op(name), abi.Other, fmt.Sprintf("args of type %T", args))
		},
	}}
}

// Do makes the syscall d as c, through the dispatcher (Call), with args
// (nil for a zero A), and returns its typed result.
func Do[A any, R any](ctx context.Context, k *Kernel, c *Caller, d abi.Call[A, R], args *A) (R, error) {
	var zero R
	var in any = args
	if args == nil {
		in = nil
	}
	res, err := k.Call(ctx, c, d.Name, in)
	if err != nil {
		return zero, err
	}
	if res == nil {
		return zero, nil
	}
	r, ok := res.(R)
	if !ok {
		return zero, abi.E(abi.Op(d.Name), abi.Other, fmt.Sprintf("result of type %T", res))
	}
	return r, nil
}

// Admit returns s with the syscall's own rule on who may make it, checked
// with the dispatcher's rules (Permit) before anything runs.
func (s Syscall) Admit(fn func(*Caller) error) Syscall {
	d := *s.def
	d.admit = fn
	return Syscall{&d}
}

// Register adds the syscalls of a table. Registering a name twice panics:
// two rooms never serve one name.
func (k *Kernel) Register(calls ...Syscall) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range calls {
		if _, dup := k.calls[s.def.name]; dup {
			panic("kernel: syscall registered twice: " + s.def.name)
		}
		k.calls[s.def.name] = s.def
	}
	k.granted = nil
}

// grantedTo returns the names of the syscalls whose grant has every bit
// of g, sorted: the capabilities the kernel derives for the users group
// (abi.Users) and for nobody (abi.Strangers).
func (k *Kernel) grantedTo(g abi.Grant) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if names, ok := k.granted[g]; ok {
		return names
	}
	names := []string{}
	for n, d := range k.calls {
		if d.grant&g == g && d.flags&KernelOnly == 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if k.granted == nil {
		k.granted = map[abi.Grant][]string{}
	}
	k.granted[g] = names
	return names
}

// grants reports whether the syscall name is registered with a grant
// that has class's bits.
func (k *Kernel) grants(name string, class abi.Grant) bool {
	k.mu.RLock()
	d := k.calls[name]
	k.mu.RUnlock()
	return d != nil && d.grant&class == class && class != 0 && d.flags&KernelOnly == 0
}

// Descs returns the descriptors of the registered syscalls made with
// Handle, sorted by name.
func (k *Kernel) Descs() []abi.Desc {
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []abi.Desc
	for _, d := range k.calls {
		if d.desc != nil {
			out = append(out, d.desc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CallName() < out[j].CallName() })
	return out
}

// Call is the single dispatcher: every syscall, from a request frame, a
// ctl line, a view being rendered or a namespace node, passes here. It
// checks that the call exists and that the caller may make it (Permit),
// runs it, and, when the caller names an Origin,
// remembers a failure for that directory's err view. args is a
// json.RawMessage (from a frame) or the syscall's Go args.
func (k *Kernel) Call(ctx context.Context, c *Caller, name string, args any) (any, error) {
	k.mu.RLock()
	def := k.calls[name]
	k.mu.RUnlock()
	res, err := k.call(ctx, c, def, name, args)
	if err != nil && c != nil && c.Origin != "" && c.Identity != nil {
		k.NoteError(c.Uid, c.Origin, err)
	}
	return res, err
}

// Permit reports whether c may make the syscall name, by the rules Call
// checks before it runs anything: the call exists, setup state,
// kernel-only, capabilities, and the syscall's own rule on who may make it
// (shell.exec: root only). A caller that asks a human before a syscall
// (the agent loop) checks Permit first, so that nobody approves a call
// that is refused anyway.
func (k *Kernel) Permit(c *Caller, name string) error {
	k.mu.RLock()
	def := k.calls[name]
	k.mu.RUnlock()
	return k.permit(c, def, name, false)
}

func (k *Kernel) permit(c *Caller, def *syscallDef, name string, fromFrame bool) error {
	if def == nil || (fromFrame && def.flags&Internal != 0) {
		return abi.E(abi.Op(name), abi.Invalid, fmt.Sprintf("unknown syscall %q", name))
	}
	if c == nil || c.Identity == nil {
		return abi.E(abi.Op(name), abi.Permission, "no identity")
	}
	if def.flags&KernelOnly != 0 && !c.isKernel() {
		return abi.E(abi.Op(name), abi.Permission, "kernel-only syscall")
	}
	if def.flags&BeforeSetup == 0 && !k.isSetUp() {
		return abi.E(abi.Op(name), abi.SetupRequired, "setup required: run sys.setup")
	}
	if !c.Can(name) {
		return abi.E(abi.Op(name), abi.Permission, "permission denied")
	}
	if def.admit != nil {
		if err := def.admit(c); err != nil {
			return abi.E(abi.Op(name), err)
		}
	}
	return nil
}

func (k *Kernel) call(ctx context.Context, c *Caller, def *syscallDef, name string, args any) (res any, err error) {
	start := time.Now()
	// A call with no trace starts one: a user's request (a frame, a ctl
	// line, a file operation); the calls it makes and the work it starts
	// carry it on (WithTrace).
	ctx, trace := EnsureTrace(ctx)
	if in := k.instr.Load(); in != nil {
		var done func(error)
		ctx, done = (*in)(ctx, c, name)
		defer func() { done(err) }()
	}
	_, fromFrame := args.(json.RawMessage)
	if err := k.permit(c, def, name, fromFrame); err != nil {
		if k.audit.wants(def) {
			k.audit.denied(ctx, c, def, args, trace, err)
		}
		return nil, err
	}
	if fromFrame {
		if args, err = def.decode(args.(json.RawMessage)); err != nil {
			return nil, err
		}
	}
	if k.audit.wants(def) {
		sc := k.audit.begin(ctx, c, def, args, trace, start)
		ctx = context.WithValue(ctx, auditKey{}, sc)
		defer func() { sc.end(err, time.Since(start)) }()
	}
	defer func() {
		if p := recover(); p != nil {
			k.log.Error("syscall panic", "call", name, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, abi.E(abi.Op(name), abi.Other, fmt.Sprintf("internal error: %v", p))
		}
	}()
	res, err = def.call(ctx, c, args)
	if err != nil {
		err = abi.WithOp(abi.Op(name), err)
		if code := abi.Code(err); code >= 500 && code != int(abi.NotImplemented) {
			k.ierrs.note(name, code, err)
		}
		k.log.DebugContext(ctx, "syscall failed", "call", name, "uid", c.Uid, "err", err)
	}
	return res, err
}

// DecodeArgs decodes a syscall's JSON args object into v strictly
// (abi.DecodeArgs): a field v does not have is a 400 naming it.
func DecodeArgs(raw json.RawMessage, v any) error { return abi.DecodeArgs(raw, v) }

// Syscalls lists the registered public syscall names.
func (k *Kernel) Syscalls() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []string
	for n, d := range k.calls {
		if d.flags&Internal == 0 {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// syscallList serves sys.syscall.list: the public syscalls the caller
// may make, by the rules Call checks (Permit), sorted. It is what a
// client offers to complete (gsv call <TAB>); a call's own checks of its
// args still apply when it is made.
func (k *Kernel) syscallList(_ context.Context, c *Caller, _ *abi.SyscallListArgs) (*abi.SyscallListResult, error) {
	k.mu.RLock()
	defs := make([]*syscallDef, 0, len(k.calls))
	for _, d := range k.calls {
		defs = append(defs, d)
	}
	k.mu.RUnlock()
	out := []string{}
	for _, d := range defs {
		if k.permit(c, d, d.name, true) == nil {
			out = append(out, d.name)
		}
	}
	sort.Strings(out)
	return &abi.SyscallListResult{Syscalls: out}, nil
}

// lastErrors remembers the last failure per (uid, directory).
type lastErrors struct {
	mu sync.Mutex
	m  map[lastErrKey]string
}

type lastErrKey struct {
	uid uint32
	dir string
}

// NoteError records err as uid's last failure in the namespace directory
// dir, which dir's err view shows. The dispatcher notes the failures of
// calls that name an Origin; the namespace notes the ctl lines it refuses
// before they become calls.
func (k *Kernel) NoteError(uid uint32, dir string, err error) {
	k.errs.mu.Lock()
	defer k.errs.mu.Unlock()
	if k.errs.m == nil {
		k.errs.m = map[lastErrKey]string{}
	}
	if len(k.errs.m) > 100000 {
		k.errs.m = map[lastErrKey]string{} // bounded memory; messages are advisory
	}
	k.errs.m[lastErrKey{uid, dir}] = err.Error()
}

// LastError returns the message of uid's last failure in dir, or "".
func (k *Kernel) lastError(uid uint32, dir string) string {
	k.errs.mu.Lock()
	defer k.errs.mu.Unlock()
	return k.errs.m[lastErrKey{uid, dir}]
}

// Serve answers one request frame (abi.Request) for c and returns the
// response frame (abi.Response), newline-terminated. A frame that does not
// parse fails with Op "frame"; every other failure's message begins with
// the syscall's name.
func (k *Kernel) Serve(ctx context.Context, c *Caller, frame []byte) []byte {
	req, err := abi.DecodeRequest(frame)
	var res any
	if err == nil {
		args := req.Args
		if args == nil {
			args = json.RawMessage("{}")
		}
		res, err = k.Call(ctx, c, req.Call, args)
	}
	return abi.EncodeResponse(req.ID, req.Call, res, err)
}

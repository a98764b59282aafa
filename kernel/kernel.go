// Package kernel is GSV's authority: the one dispatcher through which
// every syscall passes, and the state it guards.
//
//   - Dispatcher: rooms give their syscalls as tables (Fn, Register); Call
//     checks that a call exists and that its caller may make it (Permit:
//     setup state, kernel-only, capabilities, the syscall's own rule),
//     runs it and names it in every error; Serve answers abi request
//     frames; Invoke is Call with a typed result; sys.syscall.list names
//     the syscalls a caller may make.
//   - Identity: Authenticate maps a transport's Peer (a host uid, a
//     token) to an Identity; Identity.Allowed is the permission rule of
//     every file.
//   - Users and groups: sys.setup, sys.user.*, sys.group.list, sys.whoami;
//     OnUserCreated lets a room keep a record per user.
//   - Tokens: sys.token.*; a token's lease ends the connections attached
//     with it when it is revoked or expires.
//   - Configuration: sys.config.get and sys.config.set, with the
//     visibility rule of secret keys (SensitiveKey).
//   - Store: the database (Store) over its engine (Dialect; SQLite by
//     default), with group-committed writes and per-room migrations.
//   - Signal bus: Signal publishes, Subscribe reads (sys.events); the err
//     views' last failures (NoteError).
//
// The kernel knows nothing of files: the namespace (package ns) shows its
// state as a tree, and the transports serve that tree. The argument and
// result types of its public syscalls are in package abi.
package kernel

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// Config says where the kernel keeps its state.
type Config struct {
	// StateDir holds gsv.db, the 9P socket and the local device's data
	// tree (fs/, made by package devices/local).
	StateDir string
	// Store is the database: "" for the SQLite file gsv.db in
	// StateDir, a postgres:// URL (IsPostgres) for a Postgres
	// database, or another SQLite file's path.
	Store string
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// Kernel is a running GSV kernel.
type Kernel struct {
	cfg   Config
	log   *slog.Logger
	Store *Store

	mu        sync.RWMutex
	calls     map[string]*syscallDef
	granted   map[abi.Grant][]string // grantedTo's cache; Register clears it
	userHooks []UserHook             // see OnUserCreated; guarded by mu
	cfgRules  []ConfigRule           // see ConfigRules; guarded by mu

	setUp atomic.Bool
	errs  lastErrors
	bus   bus

	kid    *Identity // the kernel's own identity
	leases leases    // the grants of tokens in use

	audit   *auditLog                  // the audit log (audit.go)
	instr   atomic.Pointer[Instrument] // SetInstrument's, or nil
	started time.Time                  // when Open returned (Status)
	ierrs   internalErrors             // the last internal errors (sys.status)
}

// Open opens the kernel on cfg.StateDir, creating it if needed, migrating
// the store and registering the core syscalls.
func Open(cfg Config) (*Kernel, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The state dir is searchable (others reach the 9P socket in it) but
	// not readable; the database and the data tree are the daemon's alone:
	// host users reach them only through the namespace.
	if err := os.MkdirAll(cfg.StateDir, 0o711); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if err := os.Chmod(cfg.StateDir, 0o711); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	var d Dialect
	if IsPostgres(cfg.Store) {
		d = Postgres(cfg.Store)
	} else {
		dbPath := filepath.Join(cfg.StateDir, "gsv.db")
		if cfg.Store != "" {
			dbPath = cfg.Store
		}
		if f, err := os.OpenFile(dbPath, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
			f.Close() // SQLite gives its -wal and -shm files the database's mode
		}
		d = SQLite(dbPath)
	}
	st, err := NewStore(d)
	if err != nil {
		return nil, err
	}
	if err := st.Migrate("kernel", kernelMigrations); err != nil {
		st.Close()
		return nil, err
	}
	k := &Kernel{
		cfg:   cfg,
		log:   cfg.Logger,
		Store: st,
		calls: map[string]*syscallDef{},
		kid: &Identity{Identity: abi.Identity{Role: "kernel", Username: "kernel", Home: "/", Cwd: "/",
			Capabilities: []string{"*"}}, HostUID: -1, kernel: true},
	}
	if err := k.seed(); err != nil {
		k.Close()
		return nil, err
	}
	k.Register(k.userSyscalls()...)
	k.Register(k.configSyscalls()...)
	k.ConfigRules(kernelConfigRules()...)
	k.Register(k.tokenSyscalls()...)
	k.Register(k.eventSyscalls()...)
	k.Register(k.auditSyscalls()...)
	k.audit = newAuditLog(k)
	k.started = time.Now()
	return k, nil
}

// Close ends the token leases and the signal bus, then closes the store.
func (k *Kernel) Close() error {
	if k.audit != nil {
		k.audit.stop()
	}
	k.leases.stop()
	k.bus.closeAll()
	return k.Store.Close()
}

// StateDir returns the state directory.
func (k *Kernel) StateDir() string { return k.cfg.StateDir }

// SocketPath is where the 9P unix socket lives.
func (k *Kernel) SocketPath() string { return filepath.Join(k.cfg.StateDir, "9p.sock") }

// KernelCaller is the kernel acting on its own behalf.
func (k *Kernel) KernelCaller() *Caller { return &Caller{Identity: k.kid} }

// IdentityOf returns the identity of the user uid, as processes act.
func (k *Kernel) IdentityOf(ctx context.Context, uid uint32) (*Identity, error) {
	return k.identity(ctx, uid)
}

// UserByName returns the user record of the user called name (a 404 if
// there is none).
func (k *Kernel) UserByName(ctx context.Context, name string) (*User, error) {
	return k.userByName(ctx, name)
}

// UserOf returns the user record of uid.
func (k *Kernel) UserOf(ctx context.Context, uid uint32) (*User, error) {
	return k.userByUID(ctx, uid)
}

// Users lists every user.
func (k *Kernel) Users(ctx context.Context) ([]User, error) { return k.users(ctx) }

func (k *Kernel) isSetUp() bool { return k.setUp.Load() }

// IsSetUp reports whether the system is set up (sys.setup has run): a
// transport's handshake refuses connections with 425 until it is.
func (k *Kernel) IsSetUp() bool { return k.isSetUp() }

func now() int64 { return time.Now().UnixMilli() }

// Identity is who a caller is: its record (abi.Identity: the seed's
// ProcessIdentity plus the role and capabilities of its connection), the
// host uid it maps to, and, for a token attach, the token's lease.
type Identity struct {
	abi.Identity
	// HostUID is the host uid this user maps to, or -1.
	HostUID int `json:"-"`
	// Process narrows the user's process capability: the capability of
	// the token the identity attached with, or, on the identity a
	// process's work acts with, the narrowing that work carries (the
	// process's, its conversation's, a schedule's: see abi.NarrowCap);
	// nil narrows nothing. Only the kernel and the rooms set it.
	Process *abi.ProcessCap `json:"-"`
	// Pid is the process the caller acts as: set on the identity a
	// process's own agent loop makes its tool calls with; "" for a user,
	// a service, a device. A syscall that needs a source process (IPC,
	// notifications, watches) takes it from here.
	Pid string `json:"-"`
	// Adapter is the chat adapter kind the caller's service token is
	// bound to ("" for none): such an identity may make only the
	// syscalls granted to abi.Adapters, for that kind.
	Adapter string `json:"-"`
	kernel  bool
	lease   *lease // the token this identity attached with; nil if none
	// grants and class derive the capabilities when Capabilities is nil:
	// the syscalls registered with grants whose grant has class's bit.
	grants *Kernel
	class  abi.Grant
}

// Caps returns id's capabilities: Capabilities when it is set, or else
// the names of the syscalls the kernel's grants give id's class, sorted.
func (id *Identity) Caps() []string {
	if id.Capabilities != nil || id.grants == nil {
		return id.Capabilities
	}
	return slices.Clone(id.grants.grantedTo(id.class))
}

// Grant names the grant the identity came from (vfs.Lease): an identity
// that attached with a token names it ("token tok_…"); any other names
// no grant.
func (id *Identity) Grant() string {
	if id == nil || id.lease == nil {
		return ""
	}
	return "token " + id.lease.tokenID
}

// Done ends with the identity's grant (vfs.Lease): it is closed when the
// token the identity attached with is revoked or expires; nil for an
// identity with no token.
func (id *Identity) Done() <-chan struct{} {
	if id == nil || id.lease == nil {
		return nil
	}
	return id.lease.done
}

// Record returns id as the abi.Identity a result reports.
func (id *Identity) Record() *abi.Identity {
	r := id.Identity
	r.Capabilities = id.Caps()
	return &r
}

func (id *Identity) isKernel() bool { return id != nil && id.kernel }

// IsRoot reports whether id has root's authority: the kernel, or uid 0
// acting as a user (a service or driver token of root's is not root).
func (id *Identity) IsRoot() bool {
	return id != nil && (id.kernel || id.Uid == 0 && id.Role == "user")
}

// Allowed reports whether id may use a file owned by uid and gid with
// mode as want says: want holds the access(2) bits (4 read, 2 write, 1
// search or execute). Root may do anything; others get the owner's, the
// group's or the others' bits, the first that applies. Nobody (a host user
// with no GSV account) is a stranger to every file, as to any file system:
// the others' read and search bits, whoever owns the file, and never
// write, since nobody has no account to act as.
func (id *Identity) Allowed(uid, gid uint32, mode fs.FileMode, want uint32) bool {
	if id.IsRoot() {
		return true
	}
	perm := uint32(mode.Perm())
	if id.Role == "nobody" {
		return want&^(perm&5)&7 == 0
	}
	var bits uint32
	switch {
	case id.Uid == uid:
		bits = perm >> 6
	case id.InGroup(gid):
		bits = perm >> 3
	default:
		bits = perm
	}
	return want&^bits&7 == 0
}

// InGroup reports whether id is a member of gid.
func (id *Identity) InGroup(gid uint32) bool {
	if id.Gid == gid {
		return true
	}
	for _, g := range id.Gids {
		if g == gid {
			return true
		}
	}
	return false
}

// Can reports whether id's capabilities allow the syscall name. An
// identity the kernel made has the grants of the syscalls registered with
// it (its class: the users group's, or a stranger's); an explicit
// Capabilities list instead decides alone: "*" allows everything,
// "fs.*" every name under "fs.", others must match exactly.
func (id *Identity) Can(name string) bool {
	if id.Capabilities == nil && id.grants != nil {
		return id.grants.grants(name, id.class)
	}
	for _, c := range id.Capabilities {
		if c == "*" || c == name {
			return true
		}
		if p, ok := strings.CutSuffix(c, "*"); ok && strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Nobody is the identity of a caller the kernel does not know: its
// capabilities are the syscalls granted to strangers (abi.Strangers), the
// reads behind the files a stranger may read by their others' bits
// (/etc/passwd, /etc/group, the data tree's world-readable files and
// directories, df), and no call that writes, runs or reads anything else.
func (k *Kernel) Nobody() *Identity { return k.nobody(-1) }

// Nobody is the identity of a credential no kernel made: nobody, with
// no capability at all.
func Nobody() *Identity {
	return &Identity{Identity: abi.Identity{Role: "nobody", Uid: 65534, Gid: 65534, Username: "nobody",
		Home: "/", Cwd: "/", Capabilities: []string{}}, HostUID: -1}
}

// nobody is the identity of a host user with no GSV account.
func (k *Kernel) nobody(hostUID int) *Identity {
	return &Identity{Identity: abi.Identity{Role: "nobody", Uid: 65534, Gid: 65534, Username: "nobody",
		Home: "/", Cwd: "/"}, HostUID: hostUID, grants: k, class: abi.Strangers}
}

// Peer is what a transport knows about who is on the other end: its
// transport ("fuse", "9p-unix", "9p-tcp"), its host uid (-1 if unknown),
// the user name it gave and the secret (a token) it proved itself with.
type Peer struct {
	Transport string
	HostUID   int
	User      string
	Secret    []byte
}

// Authenticate returns the identity of a peer: a local peer (FUSE, the 9P
// unix socket) is the user mapped to its host uid; a remote peer must prove
// who it is with a token written to its 9P auth fid (see identityForToken
// for what each kind of token attaches as).
//
// A host uid mapped to no GSV user is nobody over FUSE (the "other"
// permission bits of the mount, like any file system), but its 9P attach
// is refused: a 9P attach is a GSV identity's, and nobody is none.
func (k *Kernel) Authenticate(ctx context.Context, p Peer) (*Identity, error) {
	if len(p.Secret) > 0 {
		id, err := k.identityForToken(ctx, strings.TrimSpace(string(p.Secret)), p.User)
		if err != nil {
			return nil, err
		}
		return id, nil
	}
	if p.Transport == "9p-tcp" || p.HostUID < 0 {
		return nil, abi.E(abi.Op("attach"), abi.Path(p.User), abi.Permission, "authentication required: write a token to the auth fid")
	}
	id, err := k.identityForHostUID(ctx, p.HostUID)
	if err != nil {
		return nil, err
	}
	if id.Role == "nobody" && p.Transport != "fuse" {
		return nil, abi.E(abi.Op("attach"), abi.Path(p.User), abi.Permission, fmt.Sprintf("host uid %d has no GSV account", p.HostUID))
	}
	return id, nil
}

// EnsureSetup sets the system up for the host user who started it, if that
// has not been done: the host user becomes the first GSV user (host uid 0
// is root, which exists already).
func (k *Kernel) EnsureSetup(ctx context.Context, username string, hostUID int) error {
	if k.isSetUp() {
		return nil
	}
	_, err := Do(ctx, k, k.KernelCaller(), abi.SysSetup, &abi.SetupArgs{Username: username, HostUID: &hostUID})
	return err
}

// FileArgs name a file of the data tree for the local device's internal
// file syscalls (fs.openread, fs.readraw, fs.create); see abi.FileArgs.
type FileArgs = abi.FileArgs

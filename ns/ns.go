// Package ns is the GSV namespace: the file tree whose every read and
// write is a syscall. It gives the kinds of the contract (views, ctl
// files, call files, streams) their GSV meaning over package vfs: a Meta
// whose access check is the kernel's rule, views rendered by a syscall,
// ctl files whose lines become syscalls (ParseCtl, CtlVerb tables), the
// err view of each directory; it builds the core tree (/etc, /sys, /var)
// and keeps a mount table to which rooms bind their subtrees, at start
// and at run time. It authenticates the transports' peers as kernel
// identities.
//
// The namespace keeps no state of its own: everything it shows comes
// from a syscall made as the reader, through the kernel's dispatcher.
package ns

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// Space is a namespace over one kernel.
type Space struct {
	k    *kernel.Kernel
	root *vfs.StaticDir

	mu     sync.Mutex // guards rooms and grafts
	rooms  []Room     // added rooms, in order; closed in reverse
	grafts []Graft    // what the rooms added graft onto others' directories
}

// New returns the namespace of k with its core tree (/etc, /sys, /var).
func New(k *kernel.Kernel) *Space {
	s := &Space{k: k}
	s.root = s.buildNamespace()
	s.bindAudit()
	return s
}

// Kernel returns the kernel the namespace is over.
func (s *Space) Kernel() *kernel.Kernel { return s.k }

// Root returns the root of the tree as the transports serve it. It is a
// vfs.Statfser: the space of the state directory (what df shows).
func (s *Space) Root() vfs.Dir { return rootDir{s.root, s} }

// Bind puts n at the namespace path p ("/proc", "/var/spool/cron"),
// making the static directories above it as needed; a node already bound
// at p is replaced. It panics if a directory on the way is not one that
// Bind made or the core tree has.
func (s *Space) Bind(p string, n vfs.Node) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	dir := s.root
	for i, name := range parts[:len(parts)-1] {
		child, err := dir.Lookup(context.Background(), nil, name)
		if err != nil {
			nd := vfs.NewDir(RootMeta("/"+strings.Join(parts[:i+1], "/"), fs.ModeDir|0o555))
			dir.Add(name, nd)
			child = nd
		}
		sd, ok := child.(*vfs.StaticDir)
		if !ok {
			panic("ns: Bind " + p + ": " + name + " is not a static directory")
		}
		dir = sd
	}
	dir.Add(parts[len(parts)-1], n)
}

// Unbind removes the node bound at p; later walks to p find nothing, and
// handles already open on it go on until they are closed. It is a 404 if
// nothing is bound there.
func (s *Space) Unbind(p string) error {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	dir := s.root
	for _, name := range parts[:len(parts)-1] {
		child, err := dir.Lookup(context.Background(), nil, name)
		if err != nil {
			return abi.E(abi.Op("unbind"), abi.Path(p), abi.NotExist, "nothing is bound there")
		}
		sd, ok := child.(*vfs.StaticDir)
		if !ok {
			return abi.E(abi.Op("unbind"), abi.Path(p), abi.NotExist, "nothing is bound there")
		}
		dir = sd
	}
	if !dir.Drop(parts[len(parts)-1]) {
		return abi.E(abi.Op("unbind"), abi.Path(p), abi.NotExist, "nothing is bound there")
	}
	return nil
}

// A Room is one part of the system, registered as a table in the manner
// of Plan 9's devtab: the syscalls it serves, the subtrees it binds into
// the namespace, and a Close that stops every goroutine it started. Rooms
// never import each other; they meet in the kernel's dispatcher.
type Room interface {
	// Syscalls is the room's syscall table.
	Syscalls() []kernel.Syscall
	// Mounts are the subtrees the room binds at start.
	Mounts() []Mount
	// Close stops the room's goroutines and waits for them.
	Close() error
}

// Mount is a subtree a room binds at Path.
type Mount struct {
	Path string
	Node vfs.Node
}

// A Starter is a room with work to begin once its syscalls are
// registered and its subtrees bound (a scheduler's engine, the runs a
// restart interrupted): Add calls Start last.
type Starter interface {
	Start(ctx context.Context) error
}

// Add registers r's syscalls with the kernel, binds its mounts, keeps its
// grafts if it is a Grafter and, if r is a Starter, starts it. A room
// that fails to start is closed and its error returned. Close closes the
// rooms added, in reverse order.
func (s *Space) Add(ctx context.Context, r Room) error {
	s.k.Register(r.Syscalls()...)
	for _, m := range r.Mounts() {
		s.Bind(m.Path, m.Node)
	}
	if g, ok := r.(Grafter); ok {
		s.mu.Lock()
		s.grafts = append(slices.Clip(s.grafts), g.Grafts()...)
		s.mu.Unlock()
	}
	if st, ok := r.(Starter); ok {
		if err := st.Start(ctx); err != nil {
			r.Close()
			return err
		}
	}
	s.mu.Lock()
	s.rooms = append(s.rooms, r)
	s.mu.Unlock()
	return nil
}

// Close closes every room added, last first, and returns the first error.
func (s *Space) Close() error {
	s.mu.Lock()
	rooms := s.rooms
	s.rooms = nil
	s.mu.Unlock()
	var first error
	for i := len(rooms) - 1; i >= 0; i-- {
		if err := rooms[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Authenticate implements vfs.Authenticator with the kernel's rule (see
// kernel.Authenticate): the credential is the peer's *kernel.Identity.
func (s *Space) Authenticate(ctx context.Context, p vfs.Peer) (vfs.Cred, error) {
	id, err := s.k.Authenticate(ctx, kernel.Peer{Transport: p.Transport, HostUID: p.HostUID, User: p.User, Secret: p.Secret})
	if err != nil {
		return nil, err
	}
	return id, nil
}

var (
	_ vfs.Authenticator = (*Space)(nil)
	_ vfs.Lease         = (*kernel.Identity)(nil)
	_ vfs.Subscription  = (*kernel.Subscription)(nil)
)

// ident returns the *kernel.Identity inside a vfs.Cred; any other
// credential is nobody.
func ident(cred vfs.Cred) *kernel.Identity {
	if id, ok := cred.(*kernel.Identity); ok && id != nil {
		return id
	}
	return kernel.Nobody()
}

// CallerOf returns the caller of a syscall made for cred, through the
// namespace directory origin ("" for none).
func CallerOf(cred vfs.Cred, origin string) *kernel.Caller {
	return &kernel.Caller{Identity: ident(cred), Origin: origin}
}

// rootDir is the namespace root as the transports get it: the tree, and
// the space of the storage behind it (vfs.Statfser, what df shows).
type rootDir struct {
	*vfs.StaticDir
	s *Space
}

var _ vfs.Statfser = rootDir{}

// Statfs implements vfs.Statfser with the syscall fs.statfs.
func (r rootDir) Statfs(ctx context.Context, cred vfs.Cred) (vfs.StatFS, error) {
	st, err := kernel.Do(ctx, r.s.k, CallerOf(cred, ""), abi.FsStatfs, nil)
	return vfs.StatFS(st), err
}

package devices

import (
	"context"
	"os"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// The local device on the kernel: the host it runs on (kernelHost), the
// caller it is told (whoOf), and its internal syscalls. Package
// devices/local imports no kernel; this file is where the two meet.

// kernelHost is the kernel as the local device's host (local.Host).
type kernelHost struct{ k *kernel.Kernel }

var _ local.Host = kernelHost{}

// As returns the kernel's dispatcher for the identity cred is
// (kernel.Nobody for any other credential).
func (h kernelHost) As(cred vfs.Cred) local.Dispatcher {
	return &kernelCaller{k: h.k, c: kernel.Caller{Identity: identOf(cred)}}
}

// kernelCaller is the kernel's dispatcher for one caller.
type kernelCaller struct {
	k *kernel.Kernel
	c kernel.Caller
}

// Call makes the syscall name (a descriptor's) through the kernel's
// dispatcher.
func (kc *kernelCaller) Call(ctx context.Context, name string, args any) (any, error) {
	return kc.k.Call(ctx, &kc.c, name, args)
}

// Owner returns the user name as the owner of their part of the data
// tree: files show the host uid the user maps to (else the uid) and the
// group of the user's primary gid (root's, or the users group).
func (h kernelHost) Owner(ctx context.Context, name string) (local.Owner, error) {
	u, err := h.k.UserByName(ctx, name)
	if err != nil {
		return local.Owner{}, err
	}
	o := local.Owner{Uid: u.Uid, Gid: u.Gid, HostUID: int(u.Uid), User: u.Username, Group: kernel.UsersGroup}
	if u.HostUID != nil {
		o.HostUID = *u.HostUID
	}
	if u.Gid == kernel.RootGID {
		o.Group = "root"
	}
	return o, nil
}

// Users lists the kernel's users.
func (h kernelHost) Users(ctx context.Context) ([]kernel.User, error) { return h.k.Users(ctx) }

// StateDir is the kernel's state directory.
func (h kernelHost) StateDir() string { return h.k.StateDir() }

// identOf returns the *kernel.Identity a vfs.Cred is; any other
// credential is nobody.
func identOf(cred vfs.Cred) *kernel.Identity {
	if id, ok := cred.(*kernel.Identity); ok && id != nil {
		return id
	}
	return kernel.Nobody()
}

// whoOf returns the caller c as the local device is told it.
func whoOf(c *kernel.Caller) local.Who {
	return local.Who{Identity: c.Identity, Uid: c.Uid, Gid: c.Gid, Gids: c.Gids, Username: c.Username, Home: c.Home, Cwd: c.Cwd}
}

// asCaller serves the local device's method m as a syscall handler: the
// caller becomes the device's Who.
func asCaller[A, R any](m func(context.Context, local.Who, *A) (R, error)) func(context.Context, *kernel.Caller, *A) (R, error) {
	return func(ctx context.Context, c *kernel.Caller, a *A) (R, error) { return m(ctx, whoOf(c), a) }
}

// attrCall is asCaller for a method whose result is a vfs.Attr: the
// syscall's result is the same attributes as an abi.Attr.
func attrCall[A any](m func(context.Context, local.Who, *A) (vfs.Attr, error)) func(context.Context, *kernel.Caller, *A) (abi.Attr, error) {
	return func(ctx context.Context, c *kernel.Caller, a *A) (abi.Attr, error) {
		at, err := m(ctx, whoOf(c), a)
		return abi.Attr(at), err
	}
}

// openLocal opens the local device on k and makes each user's home as
// the kernel creates the user, inside the transaction that adds them
// (kernel.OnUserCreated): a home that cannot be made fails the add.
func openLocal(k *kernel.Kernel, opts local.Options) (*local.Device, error) {
	d, err := local.New(kernelHost{k}, opts)
	if err != nil {
		return nil, err
	}
	k.OnUserCreated(func(_ *kernel.Tx, u *kernel.User) error { return d.MakeHome(*u) })
	return d, nil
}

// localSyscalls are the local device's internal syscalls: the POSIX side
// of the data tree that its nodes make (fs.stat, fs.open, ...: paths
// relative to the data root, already resolved), the file syscalls of
// subsystems (fs.openread, fs.readraw, fs.create; see abi.FileArgs) and
// fs.statfs. Each that changes the data tree publishes fs.changed (n).
func localSyscalls(d *local.Device, n *changes) []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.FsStat, attrCall(d.Stat)),
		kernel.Handle(abi.FsReaddir, asCaller(d.ReadDir)),
		kernel.Handle(abi.FsOpen, wrap(asCaller(d.Open), func(c *kernel.Caller, a *abi.OpenArgs, _ *os.File) {
			if writes(a.Flags) {
				n.noteWrite(c, a.Path)
			}
		})),
		kernel.Handle(abi.FsPread, asCaller(d.Pread)),
		kernel.Handle(abi.FsPwrite, wrap(asCaller(d.Pwrite), func(c *kernel.Caller, a *abi.IOArgs, _ int) { n.noteWrite(c, a.Rel) })),
		kernel.Handle(abi.FsFtruncate, wrap(asCaller(d.Ftruncate), func(c *kernel.Caller, a *abi.TruncArgs, _ struct{}) { n.noteWrite(c, a.Rel) })),
		kernel.Handle(abi.FsFsync, asCaller(d.Fsync)),
		kernel.Handle(abi.FsMkdir, wrap(attrCall(d.Mkdir), func(c *kernel.Caller, a *abi.MkdirArgs, _ abi.Attr) { n.note(c, "mkdir", a.Path, "") })),
		kernel.Handle(abi.FsRemove, wrap(asCaller(d.Remove), func(c *kernel.Caller, a *abi.RemoveArgs, _ struct{}) {
			n.forget(a.Path)
			n.note(c, "remove", a.Path, "")
		})),
		kernel.Handle(abi.FsRename, wrap(asCaller(d.Rename), func(c *kernel.Caller, a *abi.RenameArgs, _ struct{}) {
			n.forget(a.Old)
			n.forget(a.New)
			n.note(c, "rename", a.New, a.Old)
		})),
		kernel.Handle(abi.FsReadlink, asCaller(d.Readlink)),
		kernel.Handle(abi.FsSymlink, wrap(attrCall(d.Symlink), func(c *kernel.Caller, a *abi.SymlinkArgs, _ abi.Attr) { n.note(c, "symlink", a.Path, "") })),
		kernel.Handle(abi.FsLink, wrap(attrCall(d.Link), func(c *kernel.Caller, a *abi.RenameArgs, _ abi.Attr) { n.note(c, "link", a.New, "") })),
		kernel.Handle(abi.FsSetattr, wrap(attrCall(d.Setattr), func(c *kernel.Caller, a *abi.SetattrArgs, _ abi.Attr) { n.note(c, "setattr", a.Path, "") })),
		kernel.Handle(abi.FsOpenread, asCaller(d.OpenRead)),
		kernel.Handle(abi.FsReadraw, asCaller(d.ReadRaw)),
		kernel.Handle(abi.FsCreate, asCaller(d.Create)),
		kernel.Handle(abi.FsWorkspaceMake, asCaller(d.MakeWorkspace)),
		kernel.Handle(abi.FsWorkspaceRemove, asCaller(d.RemoveWorkspace)),
		kernel.Handle(abi.FsStatfs, func(ctx context.Context, c *kernel.Caller, a *struct{}) (abi.StatFS, error) {
			st, err := d.StatFS(ctx, whoOf(c), a)
			return abi.StatFS(st), err
		}),
	}
}

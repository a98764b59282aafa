package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
)

// Disk owners. Every file of the data tree is owned on disk by the
// "disk ids" of its namespace owner (ownerOf): uid SandboxUIDBase+<gsv
// uid> and gid SandboxUIDBase+<gsv gid> (root's parts: SandboxUIDBase
// for both), with the namespace's mode bits. A sandbox runs as its
// user's disk ids (uid, primary gid and every group's), so the host
// kernel grants inside a sandbox exactly what the namespace grants
// through FUSE and 9P, file by file: another user's 0600 file is closed,
// a 0640 file of the users group open to its members. docs/sessions.md
// says why this mechanism.
//
// The daemon keeps them true: every file it makes is given its owner's
// disk ids as it is made (fchownat, never following a link); a rename
// into another owner's tree (root's alone) re-owns the subtree moved; a
// root session's execs re-own the other owners' trees they could write;
// and a one-time sweep at start re-owns a data tree made before (keyed by
// ownersMarker). A daemon that is not root keeps no disk owners (it
// cannot chown, and runs no sandbox).

// ownersVersion is the version of the disk owners' rule; ownersMarker,
// in the data root, holds the version the tree was last swept for.
const (
	ownersVersion = "1"
	ownersMarker  = ".owners"
)

// diskIDs are the disk ids of owner o.
func diskIDs(o Owner) (uid, gid int) {
	return SandboxUIDBase + int(o.Uid), SandboxUIDBase + int(o.Gid)
}

// canOwn says whether files of the data tree can be owned by disk ids:
// not where the daemon's root maps no such uid (a container given a
// small range of ids). Such a daemon keeps no disk owners, and runs no
// sandbox (it could not run one as those ids either): its files stay the
// daemon's, which a sandbox would see as nobody's.
func (d *Device) canOwn() bool {
	f, err := d.openData(tmpDir+"/"+randomText(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		d.log.Warn("data tree: cannot keep disk owners", "err", err)
		return false
	}
	defer d.removeData(tmpDir+"/"+filepath.Base(f.Name()), false)
	defer f.Close()
	uid, gid := diskIDs(Owner{Uid: 65534, Gid: 65534})
	if err := f.Chown(uid, gid); err != nil {
		d.log.Warn("data tree: the host cannot own files by sandbox ids; exec sessions and sandboxes will not run", "err", err)
		return false
	}
	return true
}

// keepsOwners says whether the device keeps disk owners: it runs as root
// on a host that can own files by disk ids.
func (d *Device) keepsOwners() bool { return d.owning }

// ownAt gives the entry name of the directory dirfd, which is the data
// path rel, the disk ids of rel's owner, never following a link.
func (d *Device) ownAt(ctx context.Context, dirfd int, name, rel string) error {
	if !d.keepsOwners() {
		return nil
	}
	uid, gid := diskIDs(d.ownerOf(ctx, rel))
	return atErr("chown", rel, retryEINTR(func() error { return unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW) }))
}

// ownFile gives f, just made at the data path rel, the disk ids of rel's
// owner.
func (d *Device) ownFile(ctx context.Context, f *os.File, rel string) error {
	if !d.keepsOwners() {
		return nil
	}
	uid, gid := diskIDs(d.ownerOf(ctx, rel))
	return atErr("chown", rel, retryEINTR(func() error { return unix.Fchown(int(f.Fd()), uid, gid) }))
}

// ownData gives the data path rel (a final link itself) its owner's disk
// ids.
func (d *Device) ownData(ctx context.Context, rel string) error {
	if !d.keepsOwners() {
		return nil
	}
	pd, name, err := d.atParent(rel)
	if err != nil {
		return err
	}
	defer pd.Close()
	return d.ownAt(ctx, int(pd.Fd()), name, rel)
}

// reownTree gives rel and everything beneath it the disk ids of their
// owners, following no link and leaving what is already right alone. A
// file that vanishes on the way is skipped. rel "." is the whole data
// tree (the data root itself stays the daemon's).
func (d *Device) reownTree(ctx context.Context, rel string) error {
	if !d.keepsOwners() {
		return nil
	}
	if rel != "." {
		if err := d.reownEntry(ctx, rel); err != nil {
			return err
		}
	}
	f, err := d.openData(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ELOOP) {
		return nil // a file, a link, or gone
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return d.reownDir(ctx, f, rel)
}

// reownEntry re-owns the data path rel itself if its disk owner is not
// its owner's.
func (d *Device) reownEntry(ctx context.Context, rel string) error {
	pd, name, err := d.atParent(rel)
	if err != nil {
		return err
	}
	defer pd.Close()
	return d.reownAt(ctx, int(pd.Fd()), name, rel)
}

// reownAt re-owns the entry name of dirfd (the data path rel) if its disk
// owner is not its owner's.
func (d *Device) reownAt(ctx context.Context, dirfd int, name, rel string) error {
	var st unix.Stat_t
	err := retryEINTR(func() error { return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return atErr("lstat", rel, err)
	}
	uid, gid := diskIDs(d.ownerOf(ctx, rel))
	if int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	err = retryEINTR(func() error { return unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW) })
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return atErr("chown", rel, err)
}

// reownDir re-owns every entry beneath the open directory dir, the data
// path rel, descending through directories opened relative to their
// parent without following a link.
func (d *Device) reownDir(ctx context.Context, dir *os.File, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return atErr("readdir", rel, err)
	}
	for _, name := range names {
		child := name
		if rel != "." {
			child = rel + "/" + name
		}
		if err := d.reownAt(ctx, int(dir.Fd()), name, child); err != nil {
			return err
		}
		var fd int
		err := retryEINTR(func() (err error) {
			fd, err = unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			return err
		})
		if err != nil {
			continue // not a directory (or a link, or gone)
		}
		sub := os.NewFile(uintptr(fd), child)
		err = d.reownDir(ctx, sub, child)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// sweepOwners re-owns the whole data tree once per version of the rule:
// a tree made before disk owners were kept (every file root's) gets them
// at the first start that keeps them. It is idempotent; the marker
// records that it ran to the end.
func (d *Device) sweepOwners(ctx context.Context) error {
	if !d.keepsOwners() {
		return nil
	}
	marker := filepath.Join(d.dataPath, ownersMarker)
	if b, err := os.ReadFile(marker); err == nil && strings.TrimSpace(string(b)) == ownersVersion {
		return nil
	}
	start := time.Now()
	if err := d.reownTree(ctx, "."); err != nil {
		return fmt.Errorf("giving the data tree's files their owners' disk ids: %w", err)
	}
	tmp := marker + ".new"
	if err := os.WriteFile(tmp, []byte(ownersVersion+"\n"), 0o600); err != nil {
		return fmt.Errorf("data tree: %w", err)
	}
	if err := os.Rename(tmp, marker); err != nil {
		return fmt.Errorf("data tree: %w", err)
	}
	d.log.Info("data tree: gave every file its owner's disk ids", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// afterExec is the device's Sessions.AfterExec. A non-root user's
// sandbox writes only in their own tree (a mount elsewhere is read-only),
// as their own disk ids: nothing to do. Root's sandbox runs as root's
// disk ids, and where the bits let it write in another owner's tree (a
// directory others may write), what it makes would be root's on disk:
// after each exec, the other owners' trees among its read-write mounts are
// re-owned.
func (d *Device) afterExec(who Who, mounts []abi.ProcessMount) func() {
	if !who.IsRoot() || !d.keepsOwners() {
		return nil
	}
	var trees []string
	for _, m := range mounts {
		if m.Mode != abi.MountRW || strings.HasPrefix(m.HostPath, "host:") {
			continue
		}
		rel := strings.TrimPrefix(m.HostPath, "/")
		if !inData(rel) {
			continue
		}
		if rel == "home" || rel == "var/sessions" || d.ownerOf(context.Background(), rel).Uid != 0 {
			trees = append(trees, rel)
		}
	}
	if len(trees) == 0 {
		return nil
	}
	return func() {
		for _, rel := range trees {
			if err := d.reownTree(context.Background(), rel); err != nil {
				d.log.Warn("data tree: re-owning after a root session's exec", "path", "/"+rel, "err", err)
			}
		}
	}
}

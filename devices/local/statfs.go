package local

import (
	"context"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// StatFS is fs.statfs (internal): statfs(2) of the state directory, which
// holds the store and the data tree, so df on the mount shows the space
// the namespace's files really have.
func (d *Device) StatFS(ctx context.Context, who Who, _ *struct{}) (vfs.StatFS, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(d.stateDir, &st); err != nil {
		return vfs.StatFS{}, abi.E(err)
	}
	return vfs.StatFS{
		Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail,
		Files: st.Files, Ffree: st.Ffree,
		Bsize: uint32(st.Bsize), Frsize: uint32(st.Frsize), NameLen: uint32(st.Namelen),
	}, nil
}

package abi

import (
	"io/fs"
	"os"
	"time"
)

// The POSIX side of the data tree: the args and results of the Internal
// syscalls (fs.stat, fs.open, fs.pread, ...) that the local device's
// nodes make through the dispatcher. Paths are relative to the data root
// ("home/alice/notes.txt") and already resolved (the nodes hold them);
// each call checks permissions. They are Go values, never JSON.
//
// Attr, SetAttr and StatFS have the fields of vfs's types of the same
// names (abi imports nothing of ours): a node converts one into the
// other, vfs.Attr(a).

// Attr is a node's attributes (vfs.Attr's fields): fs.stat's result.
type Attr struct {
	Ino   uint64
	Mode  fs.FileMode
	Size  int64
	Mtime time.Time
	// Uid and Gid are the numbers POSIX transports show; User and Group
	// the names 9P shows.
	Uid, Gid    uint32
	User, Group string
	// Nlink is the number of names of the node (hard links); 0 means 1.
	Nlink uint32
	// Synthetic marks files whose content the tree renders.
	Synthetic bool
}

// SetAttr is what fs.setattr changes (vfs.SetAttr's fields): the fields
// that are set.
type SetAttr struct {
	Mode  *fs.FileMode // permission bits only
	Size  *int64
	Mtime *time.Time
}

// StatFS is what statfs(2) reports of the storage behind the namespace
// (vfs.StatFS's fields): fs.statfs's result.
type StatFS struct {
	Blocks uint64 `json:"blocks"` // in units of Frsize
	Bfree  uint64 `json:"bfree"`
	Bavail uint64 `json:"bavail"`
	Files  uint64 `json:"files"`
	Ffree  uint64 `json:"ffree"`
	Bsize  uint32 `json:"bsize"`
	Frsize uint32 `json:"frsize"`
	// NameLen is the longest name.
	NameLen uint32 `json:"namelen"`
}

type (
	// PathArgs name one path: fs.stat, fs.readdir, fs.readlink.
	PathArgs struct{ Path string }
	// OpenArgs are fs.open's: open(2)'s flags, and the mode of a file
	// O_CREATE makes.
	OpenArgs struct {
		Path  string
		Flags int
		Perm  fs.FileMode
	}
	// IOArgs are fs.pread's and fs.pwrite's: an open file, the buffer
	// and the offset.
	IOArgs struct {
		F   *os.File
		Buf []byte
		Off int64
		// Rel is the file's path as opened: a write that grows a home
		// counts against its quota.
		Rel string
	}
	// MkdirArgs are fs.mkdir's.
	MkdirArgs struct {
		Path string
		Perm fs.FileMode
	}
	// RemoveArgs are fs.remove's: Dir removes an empty directory, else a
	// file or link.
	RemoveArgs struct {
		Path string
		Dir  bool
	}
	// RenameArgs are fs.rename's and fs.link's: Old becomes (or is
	// linked as) New.
	RenameArgs struct{ Old, New string }
	// SymlinkArgs are fs.symlink's: a link at Path whose content is
	// Target.
	SymlinkArgs struct{ Target, Path string }
	// SetattrArgs are fs.setattr's.
	SetattrArgs struct {
		Path string
		Set  SetAttr
	}
	// TruncArgs are fs.ftruncate's and fs.fsync's (which uses F only).
	TruncArgs struct {
		F    *os.File
		Size int64
		Rel  string // the file's path as opened (see IOArgs.Rel)
	}
	// DirEnt is one entry of fs.readdir.
	DirEnt struct {
		Name string
		Attr Attr
	}
)

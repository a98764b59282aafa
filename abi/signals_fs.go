package abi

// The data tree's signal: a file or directory of /home, /workspaces or
// /var/sessions changed, and who changed it. The devices room publishes
// it for every change made through the dispatcher (the FUSE mount's and a
// 9P client's writes, which are fs.* syscalls as their identity, and
// fs.write, fs.edit and fs.delete), to the writer and root. A write
// straight to the disk (a sandboxed shell's, which runs as its session's
// user) makes none. The repos room's home keeper reads it to name each
// change's author (docs/repos.md).
var SigFsChanged = Signal[FsChanged]{Name: "fs.changed",
	Doc: "A file or directory of the data tree was written, made, removed, renamed or had its attributes set: the path and its writer."}

// FsChanged is the payload of fs.changed. Path is the namespace path
// (/home/alice/notes.txt); From is a rename's old path; Op is one of
// write, mkdir, remove, rename, link, symlink, setattr. Username, Uid
// and Pid name the writer: the user, and the process whose work it was
// ("" for a user's own). The signal is not a process's (not abi.Scoped):
// a process's event stream does not carry the files it writes.
type FsChanged struct {
	From     string `json:"from,omitempty"`
	Op       string `json:"op"`
	Path     string `json:"path"`
	Pid      string `json:"pid,omitempty"`
	Uid      uint32 `json:"uid"`
	Username string `json:"username"`
}

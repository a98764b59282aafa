package abi

import "os"

// The devices room's syscalls: the routable file tools and shell.exec
// (a target names the device), exec sessions (process.*), the device
// registry (sys.device.*) and the local device's Internal POSIX side of
// the data tree (posix.go's types).
var (
	FsRead = Call[FSReadArgs, *FSReadResult]{Name: "fs.read", Grant: Users,
		Doc: "A file's lines from an offset, or a directory's listing, on the target device."}
	FsWrite = Call[FSWriteArgs, *FSWriteResult]{Name: "fs.write", Grant: Users,
		Doc: "Writes a file whole, making its parent directories, on the target device."}
	FsEdit = Call[FSEditArgs, *FSEditResult]{Name: "fs.edit", Grant: Users,
		Doc: "Replaces a string that occurs once in a file (every occurrence with replaceAll), on the target device."}
	FsDelete = Call[FSDeleteArgs, *FSDeleteResult]{Name: "fs.delete", Grant: Users,
		Doc: "Deletes a file, or a directory with everything in it, on the target device."}
	FsSearch = Call[FSSearchArgs, *FSSearchResult]{Name: "fs.search", Grant: Users,
		Doc: "The lines holding a query in the files under a path, on the target device."}
	ShellExec = Call[ShellExecArgs, *ShellExecResult]{Name: "shell.exec", Grant: Users,
		Doc: "Runs a shell command on the target device, or polls or feeds the shell session it started."}
)

// Exec sessions: a sandbox opened once, its commands, their output.
var (
	ProcessSessionOpen = Call[SessionOpenArgs, *SessionOpenResult]{Name: "process.session.open", Grant: Users,
		Doc: "Opens an exec session: a sandbox on the local device or a remote one, within the caller's process capability."}
	ProcessExec = Call[ExecArgs, *ExecResult]{Name: "process.exec", Grant: Users,
		Doc: "Runs a command in an exec session and answers its exit and output when it ends."}
	ProcessExecStart = Call[ExecArgs, *SessionInfo]{Name: "process.exec.start", Grant: Users, Flags: Internal,
		Doc: "Starts a command in an exec session and answers at once (a session's ctl file)."}
	ProcessExecPipe = Call[ExecArgs, ExecPipe]{Name: "process.exec.pipe", Grant: Users, Flags: Internal,
		Doc: "Starts a command in an exec session with its stdin and stdout held open to the caller (a stdio MCP server)."}
	ProcessCapGet = Call[struct{}, *ProcessCap]{Name: "process.cap.get", Grant: Users, Flags: Internal,
		Doc: "The caller's process capability: the default narrowed by config and by the caller's token or process."}
	ProcessSessionSignal = Call[SessionSignalArgs, *SessionSignalResult]{Name: "process.session.signal", Grant: Users,
		Doc: "Signals an exec session's command (term, kill, int), or ends the session."}
	ProcessSessionList = Call[SessionListArgs, *SessionListResult]{Name: "process.session.list", Grant: Users,
		Doc: "The caller's exec sessions (root: all) on the local device or a target device."}
	ProcessSessionGet = Call[SessionGetArgs, *SessionInfo]{Name: "process.session.get", Grant: Users,
		Doc: "One exec session: its state, its sandbox and its last command."}
	ProcessSessionWait = Call[SessionGetArgs, *ExecResult]{Name: "process.session.wait", Grant: Users,
		Doc: "Waits for an exec session's command to end and answers its exit and output."}
	ProcessSessionOutput = Call[BlobReadArgs, *BlobReadResult]{Name: "process.session.output", Grant: Users, Flags: Internal,
		Doc: "A window of an exec session's stdout or stderr (its files)."}
	ProcessBlobRead = Call[BlobReadArgs, *BlobReadResult]{Name: "process.blob.read", Grant: Users,
		Doc: "A window of a kept output blob, on the local device or a target device."}
	ProcessBlobOpen = Call[BlobReadArgs, *os.File]{Name: "process.blob.open", Grant: Users, Flags: Internal,
		Doc: "Opens a kept output blob the caller may read (/var/blobs/sha256)."}
	ProcessBlobList = Call[SessionListArgs, []string]{Name: "process.blob.list", Grant: Users, Flags: Internal,
		Doc: "The digests of the kept output blobs the caller may read (/var/blobs/sha256)."}
)

// SessionCalls are the process.* syscalls of exec sessions that a remote
// device implements (and announces in its hello) to run sessions:
// process.exec.pipe on its tree's pipe file, the others on its call
// files.
var SessionCalls = []string{
	ProcessSessionOpen.Name, ProcessExec.Name, ProcessExecStart.Name, ProcessSessionSignal.Name,
	ProcessSessionList.Name, ProcessSessionGet.Name, ProcessSessionWait.Name,
	ProcessSessionOutput.Name, ProcessBlobRead.Name, ProcessExecPipe.Name,
}

// The device registry.
var (
	SysDeviceList = Call[DeviceListArgs, *DeviceListResult]{Name: "sys.device.list", Grant: Users,
		Doc: "The devices the caller may use (root: all), by id; online ones unless includeOffline."}
	SysDeviceGet = Call[DeviceGetArgs, *DeviceGetResult]{Name: "sys.device.get", Grant: Users,
		Doc: "One device the caller may use, or null."}
	SysDeviceUpdate = Call[DeviceUpdateArgs, *DeviceGetResult]{Name: "sys.device.update", Grant: Users,
		Doc: "Sets a device's description (its owner or root)."}
	SysDeviceGrant = Call[DeviceGrantArgs, *DeviceGetResult]{Name: "sys.device.grant", Grant: Users,
		Doc: "Grants or revokes a group's use of a device (its owner or root)."}
	SysDeviceRemove = Call[DeviceRemoveArgs, *DeviceGetResult]{Name: "sys.device.remove", Grant: Users,
		Doc: "Removes a device's record and ends its connection (its owner or root)."}
)

// The local device's Internal syscalls: the POSIX side of the data tree,
// which its nodes make (paths relative to the data root, already
// resolved), the file syscalls of subsystems (FileArgs) and fs.statfs.
// The reads among them are granted to strangers too: a host user with
// no account reads the world-readable files of the tree.
var (
	FsStat = Call[PathArgs, Attr]{Name: "fs.stat", Grant: Users | Strangers, Flags: Internal,
		Doc: "The attributes of a data tree path (a symbolic link itself)."}
	FsReaddir = Call[PathArgs, []DirEnt]{Name: "fs.readdir", Grant: Users | Strangers, Flags: Internal,
		Doc: "A data tree directory's entries with their attributes."}
	FsOpen = Call[OpenArgs, *os.File]{Name: "fs.open", Grant: Users | Strangers, Flags: Internal,
		Doc: "Opens (or with O_CREATE makes) a data tree file, as open(2)."}
	FsPread = Call[IOArgs, int]{Name: "fs.pread", Grant: Users | Strangers, Flags: Internal,
		Doc: "Reads an open data tree file at an offset."}
	FsPwrite = Call[IOArgs, int]{Name: "fs.pwrite", Grant: Users, Flags: Internal,
		Doc: "Writes an open data tree file at an offset, within its home's quota."}
	FsFtruncate = Call[TruncArgs, struct{}]{Name: "fs.ftruncate", Grant: Users, Flags: Internal,
		Doc: "Truncates an open data tree file, within its home's quota."}
	FsFsync = Call[TruncArgs, struct{}]{Name: "fs.fsync", Grant: Users, Flags: Internal,
		Doc: "Flushes an open data tree file to stable storage."}
	FsMkdir = Call[MkdirArgs, Attr]{Name: "fs.mkdir", Grant: Users, Flags: Internal,
		Doc: "Makes a data tree directory."}
	FsRemove = Call[RemoveArgs, struct{}]{Name: "fs.remove", Grant: Users, Flags: Internal,
		Doc: "Removes a data tree file or link, or an empty directory."}
	FsRename = Call[RenameArgs, struct{}]{Name: "fs.rename", Grant: Users, Flags: Internal,
		Doc: "Renames a data tree file, as rename(2)."}
	FsReadlink = Call[PathArgs, string]{Name: "fs.readlink", Grant: Users | Strangers, Flags: Internal,
		Doc: "The target of a data tree symbolic link."}
	FsSymlink = Call[SymlinkArgs, Attr]{Name: "fs.symlink", Grant: Users, Flags: Internal,
		Doc: "Makes a data tree symbolic link."}
	FsLink = Call[RenameArgs, Attr]{Name: "fs.link", Grant: Users, Flags: Internal,
		Doc: "Makes a hard link to a data tree file."}
	FsSetattr = Call[SetattrArgs, Attr]{Name: "fs.setattr", Grant: Users, Flags: Internal,
		Doc: "Changes a data tree path's mode, size or mtime."}
	FsOpenread = Call[FileArgs, *os.File]{Name: "fs.openread", Grant: Users, Flags: Internal,
		Doc: "Opens a data tree file the caller may read, for reading (a subsystem's archive)."}
	FsReadraw = Call[FileArgs, []byte]{Name: "fs.readraw", Grant: Users, Flags: Internal,
		Doc: "The content of a regular data tree file the caller may read, up to a limit."}
	FsCreate = Call[FileArgs, *os.File]{Name: "fs.create", Grant: Users, Flags: Internal,
		Doc: "Makes a new data tree file and its missing parents, open for writing."}
	FsWorkspaceMake = Call[WorkspaceMakeArgs, string]{Name: "fs.workspace.make", Grant: Users, Flags: Internal,
		Doc: "Makes /workspaces/<id>, 0700, owned by the caller; returns its path."}
	FsWorkspaceRemove = Call[WorkspaceMakeArgs, struct{}]{Name: "fs.workspace.remove", Grant: Users, Flags: Internal,
		Doc: "Removes /workspaces/<id> and its files, the caller's (root: anyone's)."}
	FsStatfs = Call[struct{}, StatFS]{Name: "fs.statfs", Grant: Users | Strangers, Flags: Internal,
		Doc: "statfs(2) of the storage behind the namespace (df)."}
)

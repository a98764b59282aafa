package abi

import "os"

// Syscalls of the devices room that proc makes (kernel.Do). They are
// written here until the devices room's own descriptors are; then they
// move there.
var (
	FsRead = Call[FSReadArgs, *FSReadResult]{Name: "fs.read", Grant: Users,
		Doc: "Reads a file (numbered lines) or lists a directory, on a device."}
	FsWrite = Call[FSWriteArgs, *FSWriteResult]{Name: "fs.write", Grant: Users,
		Doc: "Creates or replaces a whole file, on a device."}
	FsDelete = Call[FSDeleteArgs, *FSDeleteResult]{Name: "fs.delete", Grant: Users,
		Doc: "Deletes a file or directory tree, on a device."}
	FsCreate = Call[FileArgs, *os.File]{Name: "fs.create", Grant: Users, Flags: Internal,
		Doc: "Creates a file of the local device as the caller, opened for writing."}
	FsOpenread = Call[FileArgs, *os.File]{Name: "fs.openread", Grant: Users, Flags: Internal,
		Doc: "Opens a file of the local device for reading as the caller."}
	FsReadraw = Call[FileArgs, []byte]{Name: "fs.readraw", Grant: Users, Flags: Internal,
		Doc: "Reads a whole file of the local device as the caller, up to a bound."}
	ShellExec = Call[ShellExecArgs, *ShellExecResult]{Name: "shell.exec", Grant: Users,
		Doc: "Runs a shell command on a device, or polls the session of one that outran its wait."}
	SysDeviceList = Call[DeviceListArgs, *DeviceListResult]{Name: "sys.device.list", Grant: Users,
		Doc: "The devices the caller may use (root: all)."}
)

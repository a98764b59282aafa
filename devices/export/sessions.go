package export

import (
	"context"
	"os"
	"os/exec"
	"sync"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
)

// Exec sessions on the device: the local device's session code
// (local.Sessions) over rootless bubblewrap sandboxes run as the daemon's
// user. A session's mounts are directories of the export, by device path;
// each is read-write if asked and the export is not read-only. The
// sessions last as long as the kernel connection they were opened on
// (EndSessions): the kernel fails them when it ends.

// deviceSessions holds the table of the current connection.
type deviceSessions struct {
	mu  sync.Mutex
	cur *local.Sessions
	new func() (*local.Sessions, error)
}

// get returns the current table, making it on first use.
func (d *deviceSessions) get() (*local.Sessions, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		s, err := d.new()
		if err != nil {
			return nil, abi.E(abi.Offline, err.Error())
		}
		d.cur = s
	}
	return d.cur, nil
}

// end closes the current table (every session ended, its exec killed).
func (d *deviceSessions) end() {
	d.mu.Lock()
	cur := d.cur
	d.cur = nil
	d.mu.Unlock()
	if cur != nil {
		cur.Close()
	}
}

// sandboxAvailable says whether bubblewrap is installed: a device without
// it implements no process.* syscall.
func sandboxAvailable() bool {
	if _, err := exec.LookPath("bwrap"); err == nil {
		return true
	}
	_, err := os.Stat("/usr/bin/bwrap")
	return err == nil
}

// EndSessions ends the exec sessions opened so far: the device daemon
// calls it when its connection to the kernel ends, as the kernel has
// then failed them.
func (e *Export) EndSessions() {
	if e.sessions != nil {
		e.sessions.end()
	}
}

// sessionMount is the sessions' MountFunc: m.HostPath is a device path
// in the export (see resolve), opened beneath the export's root without
// leaving it by a symbolic link; it must be a directory. Its mode is
// m.Mode, read-only on a read-only export.
func (e *Export) sessionMount(ctx context.Context, who local.Who, pc abi.ProcessCap, m abi.ProcessMount) (*os.File, string, string, error) {
	abs, rel, err := e.resolve(m.HostPath)
	if err != nil {
		return nil, "", "", err
	}
	fd, err := unix.Openat2(int(e.rootFD.Fd()), rel, &unix.OpenHow{
		Flags:   uint64(unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == unix.ENOTDIR:
		return nil, "", "", abi.E(abi.Path(abs), abi.Invalid, "not a directory: a session mounts directories")
	case err == unix.EXDEV:
		return nil, "", "", abi.E(abi.Path(abs), abi.Permission, "a symbolic link leads out of the device's export")
	case err != nil:
		return nil, "", "", abi.E(abi.Path(abs), err)
	}
	mode := m.Mode
	if e.opts.ReadOnly {
		mode = abi.MountRO
	}
	return os.NewFile(uintptr(fd), abs), mode, abs, nil
}

// sessionCall is the process.* syscall c of the current session table,
// made as the device's user.
func sessionCall[A, R any](e *Export, _ abi.Call[A, R], f func(*local.Sessions, context.Context, local.Who, *A) (R, error)) handler {
	return fn(func(ctx context.Context, a *A) (R, error) {
		var zero R
		s, err := e.sessions.get()
		if err != nil {
			return zero, err
		}
		return f(s, ctx, e.who, a)
	})
}

// addSessionSyscalls adds the process.* syscalls to m.
func (e *Export) addSessionSyscalls(m map[string]handler) {
	m[abi.ProcessSessionOpen.Name] = sessionCall(e, abi.ProcessSessionOpen, (*local.Sessions).SessionOpen)
	m[abi.ProcessExec.Name] = sessionCall(e, abi.ProcessExec, (*local.Sessions).ProcessExec)
	m[abi.ProcessExecStart.Name] = sessionCall(e, abi.ProcessExecStart, (*local.Sessions).ExecStart)
	m[abi.ProcessSessionSignal.Name] = sessionCall(e, abi.ProcessSessionSignal, (*local.Sessions).SessionSignal)
	m[abi.ProcessSessionList.Name] = sessionCall(e, abi.ProcessSessionList, (*local.Sessions).SessionList)
	m[abi.ProcessSessionGet.Name] = sessionCall(e, abi.ProcessSessionGet, (*local.Sessions).SessionGet)
	m[abi.ProcessSessionWait.Name] = sessionCall(e, abi.ProcessSessionWait, (*local.Sessions).SessionWait)
	m[abi.ProcessSessionOutput.Name] = sessionCall(e, abi.ProcessSessionOutput, (*local.Sessions).SessionOutput)
	m[abi.ProcessBlobRead.Name] = sessionCall(e, abi.ProcessBlobRead, (*local.Sessions).BlobRead)
}

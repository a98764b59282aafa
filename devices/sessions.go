package devices

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
)

// Exec sessions on the router: the process.* syscalls and the process
// capability each caller has.

// migrations are the devices room's schema steps: the device registry
// (devices, the groups granted each in device_access; see registry.go),
// the shell and exec sessions on devices, and the order exec sessions
// were opened in (seq: a device's are listed so). The steps that once
// wrote grants are kept as no-ops so later numbers stay.
func migrations(d kernel.Dialect) []string {
	return []string{
		// A step kept so later numbers stay: grants come from descriptors.
		`SELECT 1`,
		`CREATE TABLE devices (
		device_id TEXT PRIMARY KEY,
		owner_uid INTEGER NOT NULL,
		description TEXT NOT NULL DEFAULT '',
		platform TEXT NOT NULL DEFAULT '',
		version TEXT NOT NULL DEFAULT '',
		implements TEXT NOT NULL DEFAULT '[]',
		online INTEGER NOT NULL DEFAULT 0,
		first_seen_at INTEGER NOT NULL,
		connected_at INTEGER,
		disconnected_at INTEGER,
		last_seen_at INTEGER NOT NULL,
		connection_id TEXT);
	CREATE TABLE device_access (
		device_id TEXT NOT NULL REFERENCES devices(device_id) ON DELETE CASCADE,
		gid INTEGER NOT NULL,
		PRIMARY KEY (device_id, gid));`,
		`SELECT 1`, // a step kept: grants come from descriptors
		// The shell sessions running on devices, by session id: where a poll
		// goes, and, once the device is gone, what it answers.
		`CREATE TABLE device_shell_sessions (
		session_id TEXT PRIMARY KEY,
		device_id TEXT NOT NULL,
		connection_id TEXT NOT NULL,
		uid INTEGER NOT NULL,
		failed INTEGER NOT NULL DEFAULT 0,
		updated_at INTEGER NOT NULL)`,
		// The exec sessions opened on devices, by session id: where later
		// calls go, and, once the device is gone, what they answer.
		`CREATE TABLE device_process_sessions (
		session_id TEXT PRIMARY KEY,
		device_id TEXT NOT NULL,
		connection_id TEXT NOT NULL,
		uid INTEGER NOT NULL,
		failed INTEGER NOT NULL DEFAULT 0,
		expires_at INTEGER NOT NULL)`,
		`SELECT 1`, // a step kept: grants come from descriptors
		`ALTER TABLE device_process_sessions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0`,
		d.NumberRows("device_process_sessions", "seq"),
	}
}

// Config keys of the process capability: the system's (root sets it),
// then the user's (root sets it too: users may set only their ai/ keys).
const (
	processCapKey     = "config/process/cap"
	userProcessCapKey = "users/%d/process/cap"
)

// processCapRules are the schema of the process capability's config keys:
// a JSON abi.ProcessCap object, decoded strictly (a field it does not
// have is named) and well formed (abi.ProcessCap.Check). A value that
// processCap could not read is refused when it is set, so that it never
// fails every user's open.
func processCapRules() []kernel.ConfigRule {
	check := func(v string) error {
		var pc abi.ProcessCap
		if !strings.HasPrefix(strings.TrimSpace(v), "{") {
			return fmt.Errorf("the process capability is a JSON object such as {\"networks\":[\"none\"],\"mounts\":[{\"prefix\":\"~\",\"mode\":\"rw\"}]}")
		}
		if err := abi.DecodeArgs(json.RawMessage(v), &pc); err != nil {
			return fmt.Errorf("the process capability does not parse: %v", err)
		}
		return pc.Check()
	}
	return []kernel.ConfigRule{{Pattern: processCapKey, Check: check}, {Pattern: "users/*/process/cap", Check: check}}
}

// processCap returns c's process capability: the default, narrowed by
// config/process/cap, then by users/<uid>/process/cap, each a JSON
// abi.ProcessCap, then by c's own narrowing (kernel.Identity.Process:
// the token c attached with, or, for a process's calls, the narrowing
// its work carries; abi.NarrowCap). A key that does not parse is an
// error, never a wider capability.
func (r *Router) processCap(ctx context.Context, c *kernel.Caller) (*abi.ProcessCap, error) {
	pc := local.DefaultProcessCap(c.IsRoot())
	for _, key := range []string{processCapKey, fmt.Sprintf(userProcessCapKey, c.Uid)} {
		res, err := kernel.Do(ctx, r.k, r.k.KernelCaller(), abi.SysConfigGet, &abi.ConfigGetArgs{Key: key})
		if err != nil {
			return nil, err
		}
		for _, e := range res.Entries {
			if e.Key != key {
				continue
			}
			var narrow abi.ProcessCap
			if err := json.Unmarshal([]byte(e.Value), &narrow); err != nil {
				return nil, abi.E(abi.Path(key), abi.Other, fmt.Sprintf("the process capability does not parse: %v", err))
			}
			pc = *abi.NarrowCap(&pc, &narrow)
		}
	}
	if c.Identity.Process != nil { // the token the caller attached with, or the narrowing of a process's work
		pc = *abi.NarrowCap(&pc, c.Identity.Process)
	}
	return &pc, nil
}

// sessionSyscalls are the process.* syscalls: sessions of the local
// device (target.local), and of remote devices (target.device; see
// procroute.go), whose later calls go where the session runs.
func (r *Router) sessionSyscalls() []kernel.Syscall {
	d := r.local
	sid := func(a *abi.SessionGetArgs) string { return a.SessionID }
	execSID := func(a *abi.ExecArgs) string { return a.SessionID }
	return []kernel.Syscall{
		kernel.Handle(abi.ProcessSessionOpen, r.sessionOpen),
		onSession(r, abi.ProcessExec, execSID, execDeadline, d.ProcessExec, nil),
		onSession(r, abi.ProcessSessionSignal,
			func(a *abi.SessionSignalArgs) string { return a.SessionID }, signalDeadline, d.SessionSignal, goneSignal),
		kernel.Handle(abi.ProcessSessionList, r.sessionListOn),
		onSession(r, abi.ProcessSessionGet, sid, routeDeadline, d.SessionGet, goneInfo),
		onSession(r, abi.ProcessSessionWait, sid, waitDeadline, d.SessionWait, nil),
		kernel.Handle(abi.ProcessBlobRead, r.blobReadOn),
		onSession(r, abi.ProcessExecStart, execSID, routeDeadline, d.ExecStart, nil),
		kernel.Handle(abi.ProcessExecPipe, r.execPipe),
		kernel.Handle(abi.ProcessCapGet, func(ctx context.Context, c *kernel.Caller, _ *struct{}) (*abi.ProcessCap, error) {
			return r.processCap(ctx, c)
		}),
		onSession(r, abi.ProcessSessionOutput,
			func(a *abi.BlobReadArgs) string { id, _, _ := strings.Cut(a.BlobRef, "/"); return id }, routeDeadline, d.SessionOutput, nil),
		kernel.Handle(abi.ProcessBlobOpen, asCaller(func(ctx context.Context, who local.Who, a *abi.BlobReadArgs) (*os.File, error) {
			return d.BlobOpen(ctx, who, a)
		})),
		kernel.Handle(abi.ProcessBlobList, asCaller(d.BlobList)),
	}
}

// sessionOpen is process.session.open with the caller's process
// capability: on the local device (target.local) or a remote one
// (target.device).
func (r *Router) sessionOpen(ctx context.Context, c *kernel.Caller, a *abi.SessionOpenArgs) (*abi.SessionOpenResult, error) {
	if (a.Target.Local == nil) == (a.Target.Device == nil) {
		return nil, abi.E(abi.Invalid, "target: want exactly one of {local:{...}} and {device:{id:...}}")
	}
	pc, err := r.processCap(ctx, c)
	if err != nil {
		return nil, err
	}
	if a.Target.Device != nil {
		return r.sessionOpenOn(ctx, c, pc, a)
	}
	who := whoOf(c)
	who.Process = pc
	if b := r.withPackages(ctx, c, a); b != a {
		res, err := r.local.SessionOpen(ctx, who, b)
		if abi.KindOf(err) != abi.Permission {
			return res, err
		}
		// The caller's capability does not reach its package commands'
		// directory: the session opens without them.
	}
	return r.local.SessionOpen(ctx, who, a)
}

// withPackages is a local session's args with the caller's package
// commands (pkg.session): their directory mounted read-only and first
// on the PATH, unless the caller set PATH or mounts that guest path
// itself. It returns a itself when the package room is not there or the
// caller has no package commands. A caller whose capability does not
// reach that directory gets a session without it (sessionOpen tries
// again).
func (r *Router) withPackages(ctx context.Context, c *kernel.Caller, a *abi.SessionOpenArgs) *abi.SessionOpenArgs {
	res, err := kernel.Do(ctx, r.k, c, abi.PkgSession, &struct{}{})
	if err != nil || res.Mount == nil {
		return a
	}
	loc := *a.Target.Local
	if _, ok := loc.Env["PATH"]; ok {
		return a
	}
	for _, m := range loc.Mounts {
		if m.GuestPath == res.Mount.GuestPath {
			return a
		}
	}
	if loc.Workdir == "" && len(loc.Mounts) == 0 {
		loc.Workdir = "/home/" + c.Username // the default the mount would change
	}
	loc.Mounts = append(slices.Clone(loc.Mounts), *res.Mount)
	env := maps.Clone(loc.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["PATH"] = res.Path
	loc.Env = env
	b := *a
	b.Target.Local = &loc
	return &b
}

// execPipe is process.exec.pipe, with the caller's process capability
// (which must allow all the session was opened with, as for any exec):
// on the local device, or on the remote device the session runs on,
// its stdin and stdout carried over the device's connection (pipe.go).
func (r *Router) execPipe(ctx context.Context, c *kernel.Caller, a *abi.ExecArgs) (abi.ExecPipe, error) {
	sr, remote, err := r.deviceSession(ctx, c, a.SessionID)
	if err != nil {
		return nil, err
	}
	if remote && sr.failed {
		return nil, errSessionGone(a.SessionID)
	}
	pc, err := r.processCap(ctx, c)
	if err != nil {
		return nil, err
	}
	if remote {
		if !networkAllowed(*pc, sr.network) {
			return nil, abi.E(abi.Path(a.SessionID), abi.Permission,
				fmt.Sprintf("this session's network_mode %q is not allowed by your process capability", sr.network))
		}
		if !slices.Contains(sr.rd.implements, abi.ProcessExecPipe.Name) {
			return nil, abi.E(abi.Path(a.SessionID), abi.Invalid, fmt.Sprintf("Device %q does not implement %s (its daemon is older: update it)", sr.dev, abi.ProcessExecPipe.Name))
		}
		return sr.rd.openPipe(ctx, a, sr.rd.timeout)
	}
	who := whoOf(c)
	who.Process = pc
	return r.local.ExecPipe(ctx, who, a)
}

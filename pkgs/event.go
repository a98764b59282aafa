package pkgs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// pkg.event: the package.event schedule target. The event is handed to
// a command of the package (its entrypoint), run in a fresh exec session
// of the caller's (the schedule's owner): argv [entrypoint, event], the
// environment GSV_PKG, GSV_PKG_EVENT and GSV_PKG_PAYLOAD (the payload's
// JSON).

// eventTimeout bounds one event's command.
const eventTimeout = int64(10 * 60 * 1e9)

// event serves pkg.event.
func (r *Room) event(ctx context.Context, c *kernel.Caller, a *abi.PkgEventArgs) (*abi.PkgEventResult, error) {
	if err := checkName("entrypoint", a.Entrypoint); err != nil {
		return nil, err
	}
	if err := kernel.CheckText("event", a.Event, kernel.MaxLabel); err != nil {
		return nil, err
	}
	if a.Event == "" {
		return nil, abi.E(abi.Invalid, "event: empty")
	}
	if len(a.Payload) > 64<<10 {
		return nil, abi.E(abi.Invalid, "payload: over 64 KiB")
	}
	rec, err := r.lookup(ctx, c, a.PackageID)
	if err != nil {
		return nil, err
	}
	if rec.uid != c.Uid {
		return nil, abi.E(abi.Path(rec.id), abi.Permission, "a package's commands run as its owner: "+ownerWord(rec)+"'s, not the caller's")
	}
	if !rec.active() {
		return nil, abi.E(abi.Path(rec.id), abi.Invalid, "the package is not enabled (or waits for a review)")
	}
	if !slices.Contains(rec.installed.Commands, a.Entrypoint) {
		return nil, abi.E(abi.Path(rec.id), abi.NotExist, fmt.Sprintf("entrypoint: %q is not a command of the package", a.Entrypoint))
	}
	open, err := kernel.Do(ctx, r.k, c, abi.ProcessSessionOpen, &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{
		Mounts:      []abi.ProcessMount{{HostPath: binDirOf(c.Username), GuestPath: BinGuest, Mode: "ro"}},
		Workdir:     "/home/" + c.Username,
		Env:         map[string]string{"PATH": BinGuest + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		NetworkMode: "none"}}})
	if err != nil {
		return nil, abi.E(abi.Path(rec.id), err)
	}
	if open.Status != abi.SessionReady {
		return nil, abi.E(abi.Path(rec.id), abi.Offline, fmt.Sprintf("its exec session did not open: %s: %s", open.ErrorCode, open.Error))
	}
	defer kernel.Do(context.WithoutCancel(ctx), r.k, c, abi.ProcessSessionSignal, &abi.SessionSignalArgs{SessionID: open.SessionID, Signal: abi.SignalKill})
	timeout := eventTimeout
	res, err := kernel.Do(ctx, r.k, c, abi.ProcessExec, &abi.ExecArgs{SessionID: open.SessionID,
		Argv: []string{BinGuest + "/" + a.Entrypoint, a.Event}, TimeoutNs: &timeout,
		EnvPatch: map[string]string{"GSV_PKG": rec.id, "GSV_PKG_EVENT": a.Event, "GSV_PKG_PAYLOAD": string(a.Payload)}})
	if err != nil {
		return nil, abi.E(abi.Path(rec.id), err)
	}
	out := lastLine(res.Stdout)
	if res.Status != "ok" || res.ExitCode != 0 {
		msg := fmt.Sprintf("%s %s: %s, exit %d", a.Entrypoint, a.Event, res.Status, res.ExitCode)
		if e := lastLine(res.Stderr); e != "" {
			msg += ": " + e
		} else if res.Error != "" {
			msg += ": " + res.Error
		}
		return nil, abi.E(abi.Path(rec.id), abi.Other, msg)
	}
	return &abi.PkgEventResult{ExitCode: res.ExitCode, Summary: clip(strings.TrimSpace(a.Entrypoint + " " + a.Event + ": " + out))}, nil
}

// lastLine is the last non-empty line of an inline output.
func lastLine(o *abi.ExecOutput) string {
	if o == nil || o.InlineText == nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(o.InlineText.Text), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

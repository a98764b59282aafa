package proc

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/codemode"
	"gsvfs.dev/gsvfs/kernel"
)

// codeModeCalls are the syscalls a block's wrappers make: shell(...),
// fs.*(...) and mcp.<server>.<tool>(...). A block makes no other.
var codeModeCalls = map[string]bool{
	abi.ShellExec.Name: true, abi.FsRead.Name: true, abi.FsWrite.Name: true,
	abi.FsEdit.Name: true, abi.FsDelete.Name: true, abi.FsSearch.Name: true,
	abi.SysMcpCall.Name: true,
}

// codeModeMaxWall bounds a run's timeoutMs.
const codeModeMaxWall = 10 * time.Minute

// sysCodeModeRun serves codemode.run: a person runs a block as one of
// their processes (default their init). Its nested calls are syscalls
// made as that process (its identity, cwd and pid, and the process
// capability of the token the person attached with), with the args'
// target and cwd as the defaults of calls that name none. They ask no
// human: the caller is the person who would be asked, and may make each
// call directly.
func (m *engine) sysCodeModeRun(ctx context.Context, c *kernel.Caller, a *abi.CodeModeRunArgs) (*abi.CodeModeResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	caller, err := m.processCaller(ctx, p)
	if err != nil {
		return nil, err
	}
	// The block's calls are the person's: they carry the process
	// capability of the token the person attached with, so a narrowed
	// token binds a block's shell as it binds the person's own calls;
	// and the process's own narrowing (processCaller).
	caller.Identity.Process = abi.NarrowCap(caller.Identity.Process, c.Identity.Process)
	if a.Cwd != "" && (a.Target == "" || a.Target == "gsv") {
		caller.Cwd = a.Cwd
	}
	req := codemode.Request{Code: a.Code, Argv: a.Argv, Modules: m.codeModeModules(ctx, caller)}
	if len(a.Args) > 0 && string(a.Args) != "null" {
		req.ArgsJSON = a.Args
	}
	if req.Limits.Wall, err = codeModeWall(a.TimeoutMs); err != nil {
		return nil, err
	}
	return m.runCodeMode(ctx, p.Uid, req, m.codeModeCall(caller, a.Target, a.Cwd, ""))
}

// sysCodeModeExec serves codemode.exec, the agent's CodeMode tool: the
// caller is the process (an identity with its Pid), and the block's
// nested calls go as the process's direct tool calls go, through the
// dispatcher as it, under the same approval policy: a call that needs a
// human's approval runs only if the process remembers that approval
// ("approve and remember" of an earlier request); else it fails in the
// block with "needs approval".
func (m *engine) sysCodeModeExec(ctx context.Context, c *kernel.Caller, a *abi.CodeModeExecArgs) (*abi.CodeModeResult, error) {
	if c.Identity == nil || c.Pid == "" {
		return nil, abi.E(abi.Permission, "codemode.exec is a process's own call")
	}
	wall, err := codeModeWall(a.TimeoutMs)
	if err != nil {
		return nil, err
	}
	req := codemode.Request{Code: a.Code, Limits: codemode.Limits{Wall: wall}, Modules: m.codeModeModules(ctx, c)}
	return m.runCodeMode(ctx, c.Uid, req, m.codeModeCall(c, "", "", c.Pid))
}

// blockKey is the context key of the run tool call (a *blockCall) that
// a codemode.exec serves: runTool sets it, and a nested call that needs
// a human's approval asks as part of that call.
type blockKey struct{}

// blockCall is the CodeMode tool call of a run that a block runs in.
type blockCall struct {
	pr     *process
	r      *activeRun
	callID string
	asked  atomic.Int64 // the requests the block made
}

// codeModeModules are the CodeMode modules of the active packages
// caller sees (pkg.modules), each pkg.<name> in a block: none when there
// is no package room or it fails (a block runs without them).
func (m *engine) codeModeModules(ctx context.Context, caller *kernel.Caller) []codemode.Module {
	ms, err := kernel.Do(ctx, m.k, caller, abi.PkgModules, &struct{}{})
	if err != nil {
		if abi.KindOf(err) != abi.NotExist {
			m.log.Warn("proc: package modules", "uid", caller.Uid, "err", err)
		}
		return nil
	}
	out := make([]codemode.Module, len(ms))
	for i, mod := range ms {
		out[i] = codemode.Module{Name: mod.Name, Source: mod.Source}
	}
	return out
}

// codeModeWall is the wall time of timeoutMs (0: the default).
func codeModeWall(timeoutMs int64) (time.Duration, error) {
	if timeoutMs < 0 {
		return 0, abi.E(abi.Invalid, "timeoutMs must not be negative")
	}
	d := time.Duration(timeoutMs) * time.Millisecond
	if d > codeModeMaxWall {
		return 0, abi.E(abi.Invalid, fmt.Sprintf("timeoutMs is at most %d", codeModeMaxWall.Milliseconds()))
	}
	return d, nil
}

// DefaultCodeModeBlocks is how many CodeMode blocks one user runs at once
// unless Options.CodeModeBlocks says otherwise.
const DefaultCodeModeBlocks = 8

// runCodeMode runs req, a block of user uid, in a worker and returns its
// result. A user runs at most Options.CodeModeBlocks blocks at once (each
// is a process): one more is refused (409) at once. A user's blocks start
// at most at a rate (blockGate): past it a block waits for its turn, its
// place among the user's blocks at once held, until ctx ends.
func (m *engine) runCodeMode(ctx context.Context, uid uint32, req codemode.Request, call codemode.CallFunc) (*abi.CodeModeResult, error) {
	if m.blocks == nil {
		return nil, abi.E(abi.Offline, "CodeMode is not available: the daemon has no worker command")
	}
	m.blockMu.Lock()
	n := m.blockRuns[uid]
	if n >= m.opts.CodeModeBlocks {
		m.blockMu.Unlock()
		return nil, abi.E(abi.Busy, fmt.Sprintf("%d CodeMode blocks of this user are running: at most %d at once", n, m.opts.CodeModeBlocks))
	}
	m.blockRuns[uid] = n + 1
	m.blockMu.Unlock()
	defer func() {
		m.blockMu.Lock()
		if m.blockRuns[uid]--; m.blockRuns[uid] == 0 {
			delete(m.blockRuns, uid)
		}
		m.blockMu.Unlock()
	}()
	if err := m.blockGate.take(ctx, uid); err != nil {
		return nil, abi.E(fmt.Errorf("waiting for this user's next CodeMode start (at most %d a second after a burst of %d): %w", blockRate, blockBurst, err))
	}
	res, err := m.blocks.Run(ctx, req, call)
	if err != nil {
		return nil, abi.E(abi.Other, err)
	}
	return &abi.CodeModeResult{Status: res.Status, Result: res.Result, Error: res.Error, Logs: res.Logs}, nil
}

// codeModeCall serves a block's nested calls as caller: target and cwd,
// when set, are the defaults of calls that name none (cwd of shell.exec
// only: an fs path is resolved against the caller's cwd); askPid, when
// set, is the process whose approval policy the calls are under.
func (m *engine) codeModeCall(caller *kernel.Caller, target, cwd, askPid string) codemode.CallFunc {
	return func(ctx context.Context, name string, raw json.RawMessage) (json.RawMessage, error) {
		if !codeModeCalls[name] {
			return nil, fmt.Errorf("%s: not a CodeMode call", name)
		}
		args, err := codeModeArgs(name, raw, target, cwd)
		if err != nil {
			return nil, err
		}
		if askPid != "" {
			if err := m.k.Permit(caller, name); err != nil {
				return nil, err
			}
			// A process narrowed to some tools (a package profile's)
			// makes in a block only the calls of those tools.
			if t := toolNameOf(name); !m.toolAllowed(ctx, m.proc(askPid, caller.Uid), t) {
				return nil, fmt.Errorf("%s: the %s tool is not one of this process's tools", name, t)
			}
			if need := approval(name, args, caller.Home, caller.Cwd); need != "" {
				ok, err := m.allowed(ctx, askPid, need)
				if err != nil {
					return nil, err
				}
				if !ok {
					b, _ := ctx.Value(blockKey{}).(*blockCall)
					if b == nil {
						return nil, fmt.Errorf("%s: needs approval: approve %q for this process first (approve and remember a direct call of it), or make the call outside CodeMode", name, need)
					}
					var substitute *string
					if args, substitute, err = m.askInBlock(ctx, b, name, need, args); err != nil {
						return nil, err
					}
					if substitute != nil {
						return json.Marshal(*substitute)
					}
				}
			}
		}
		acting := caller
		if b, _ := ctx.Value(blockKey{}).(*blockCall); b != nil {
			// A block of a run: each call acts within what the run's
			// conversation carries now (the answer to its approval may
			// have narrowed it).
			if acting, err = m.actingCaller(ctx, caller, b.pr.pid, b.r.cid, b.r.gen); err != nil {
				return nil, fmt.Errorf("%s: %v", name, err)
			}
		}
		res, err := m.k.Call(ctx, acting, name, json.RawMessage(args))
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("%s: result: %v", name, err)
		}
		return b, nil
	}
}

// askInBlock asks a human to approve a nested call of block call b
// (syscall name with args, needing approval of need), as a direct tool
// call asks: a HIL request of the run, shown with the tool's name and the
// call id "<CodeMode call id>/codemode/<n>", with the run waiting on it.
// The block waits for the answer with its wall clock held. It returns the
// args to run (the edited args, if the human edited them), or the text
// the human substituted for the call's result, or the refusal (denied,
// expired, or the run's end: the request is then stale).
func (m *engine) askInBlock(ctx context.Context, b *blockCall, name, need string, args json.RawMessage) (json.RawMessage, *string, error) {
	release := codemode.Hold(ctx)
	defer release()
	pr, r := b.pr, b.r
	h := m.hilRequest(ctx, pr, r, fmt.Sprintf("%s/codemode/%d", b.callID, b.asked.Add(1)), toolNameOf(name), need, args)
	answered := make(chan struct{})
	m.hilWaiters.Store(h.RequestID, answered)
	defer m.hilWaiters.Delete(h.RequestID)
	r.blockAsks.Add(1)
	defer r.blockAsks.Add(-1)
	if err := m.askHil(ctx, pr, r, h); err != nil {
		return nil, nil, err
	}
	select {
	case <-answered:
	case <-ctx.Done():
		// The run ended (abort, wall time, shutdown): nobody waits for
		// the answer any more. The run is running again for whoever
		// records its end.
		bg := context.WithoutCancel(ctx)
		if err := m.st.Tx(bg, func(tx *kernel.Tx) error {
			if _, err := m.st.TxExec(tx, `UPDATE proc_hil SET status='stale' WHERE request_id=? AND status='pending'`, h.RequestID); err != nil {
				return err
			}
			_, err := m.st.TxExec(tx, `UPDATE proc_runs SET status='running' WHERE run_id=? AND status='waiting_hil'`, r.id)
			return err
		}); err != nil {
			m.log.Error("proc: a block's HIL request made stale", "pid", pr.pid, "request", h.RequestID, "err", err)
		}
		return nil, nil, fmt.Errorf("%s: no answer to approval request %s: %v", name, h.RequestID, ctx.Err())
	}
	var status string
	var edited, result sql.NullString
	if err := m.st.QueryRowContext(ctx, `SELECT status,edited_args,result FROM proc_hil WHERE request_id=?`, h.RequestID).Scan(&status, &edited, &result); err != nil {
		return nil, nil, err
	}
	switch status {
	case "approved":
		if edited.Valid {
			return json.RawMessage(edited.String), nil, nil
		}
		return args, nil, nil
	case "substituted":
		return nil, &result.String, nil
	case "denied":
		return nil, nil, fmt.Errorf("%s: %s", name, resultDenied)
	case "expired":
		return nil, nil, fmt.Errorf("%s: %s", name, resultExpired)
	}
	return nil, nil, fmt.Errorf("%s: approval request %s is %s", name, h.RequestID, status)
}

// toolNameOf is the name of the agent's tool that makes syscall, or the
// syscall itself when no tool does.
func toolNameOf(syscall string) string {
	for _, t := range tools {
		if t.syscall == syscall {
			return t.def.Name
		}
	}
	return syscall
}

// codeModeArgs are a nested call's args raw with target and cwd (when
// set) as the defaults of what they do not name, and raw:true the default
// of fs.read's (a block reads a file's bytes, not numbered lines). Args
// with no default to add pass as they are (the syscall decodes them).
func codeModeArgs(name string, raw json.RawMessage, target, cwd string) (json.RawMessage, error) {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%s: arguments must be an object", name)
	}
	if name == abi.SysMcpCall.Name {
		return raw, nil // a server's tool runs where its server does
	}
	if cwd == "" || name != abi.ShellExec.Name {
		cwd = ""
		if target == "" && name != abi.FsRead.Name {
			return raw, nil
		}
		if target == "" && !bytes.Contains(t, []byte(`"raw"`)) {
			// fs.read's one default, added without decoding the args
			// (the syscall decodes them, strictly, as it would).
			rest := bytes.TrimLeft(t[1:], " \t\r\n")
			sep := ","
			if len(rest) > 0 && rest[0] == '}' {
				sep = ""
			}
			return append([]byte(`{"raw":true`+sep), t[1:]...), nil
		}
	}
	var a map[string]any
	if err := json.Unmarshal(raw, &a); err != nil || a == nil {
		return nil, fmt.Errorf("%s: arguments must be an object", name)
	}
	if _, ok := a["target"]; !ok && target != "" {
		a["target"] = target
	}
	if _, ok := a["raw"]; !ok && name == abi.FsRead.Name {
		// A block gets a file's bytes; the numbered lines are for a
		// model reading them (its Read tool).
		a["raw"] = true
	}
	if _, ok := a["cwd"]; !ok && cwd != "" {
		if _, cont := a["sessionId"]; !cont {
			a["cwd"] = cwd
		}
	}
	return json.Marshal(a)
}

// codeModeTool is the agent's CodeMode tool's description.
var codeModeTool = strings.Join([]string{
	"Run a JavaScript block (the body of an async function: top-level await, explicit return) for multi-step work that is easier as code than as many tool calls.",
	"In the block: await shell(command, {target, cwd, sessionId, timeoutMs, background}) returns the shell.exec result ({status: completed|running|failed, output, exitCode, sessionId}; poll a running one with shell(\"\", {sessionId})),",
	"await fs.read/write/edit/delete/search(args) take the Read/Write/Edit/Delete/Search tools' args and return their results; console.log lines come back as logs.",
	"await mcp.<server>.<tool>(args) calls a tool of your owner's MCP servers (find them with the Mcp tool): it returns the tool's structured content, else its text (parsed as JSON when it is JSON), and throws the tool's error.",
	"pkg.<module> is a CodeMode module of your owner's packages (its exports: await pkg.<module>.<fn>(...)); its calls are the block's.",
	"Each call is one of your tool calls, as you: one that needs approval waits for the user's answer, as a direct call does.",
	"No network, no timers; limits: 64 MiB, 30 s (timeoutMs), call depth.",
	"Returns {status: completed, result, logs} or {status: failed, error, logs}.",
}, " ")

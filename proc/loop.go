package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/abi/schema"
	"gsvfs.dev/gsvfs/codemode"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// errStale is returned when a run's work arrives after its conversation
// moved on (reset, abort): the work is dropped.
var errStale = errors.New("stale run")

// tool maps a model tool to the syscall it makes.
type tool struct {
	def     model.ToolDef
	syscall string
	// args turns the model's arguments into the syscall's.
	args func(raw json.RawMessage) (json.RawMessage, error)
}

// toolRoutes are the tools whose syscall depends on the model's
// arguments (one tool that searches or calls): each makes the syscall
// and its args. The tool's own syscall is the one that can need approval.
var toolRoutes = map[string]func(raw json.RawMessage) (syscall string, args json.RawMessage, err error){
	"Mcp": mcpRoute,
}

// passArgs passes the model's arguments as the syscall's, target
// included: the devices router decides where a routable call runs ("" or
// "gsv" is the local device; another target is its error).
func passArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage("{}"), nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("tool arguments are not a JSON object: %v", err)
	}
	return json.Marshal(m)
}

// tools are the agent's tools: each is a syscall made as the process.
// Each tool's schema is inferred from its argument type in abi
// (abi/tools.go).
var tools = []tool{
	{model.ToolDef{Name: "Read", Description: "Read a file (numbered lines; a PNG, JPEG, GIF or WebP image is shown to you as the image) or list a directory.",
		Schema: schema.MustTool[abi.ReadTool]()},
		abi.FsRead.Name, passArgs},
	{model.ToolDef{Name: "Write", Description: "Create or replace a whole file.",
		Schema: schema.MustTool[abi.WriteTool]()},
		abi.FsWrite.Name, passArgs},
	{model.ToolDef{Name: "Edit", Description: "Replace an exact string in a file.",
		Schema: schema.MustTool[abi.EditTool]()},
		abi.FsEdit.Name, passArgs},
	{model.ToolDef{Name: "Delete", Description: "Delete a file or directory tree.",
		Schema: schema.MustTool[abi.DeleteTool]()},
		abi.FsDelete.Name, passArgs},
	{model.ToolDef{Name: "Search", Description: "Search files for a literal string.",
		Schema: schema.MustTool[abi.SearchTool]()},
		abi.FsSearch.Name, passArgs},
	{model.ToolDef{Name: "Shell", Description: "Run a shell command (/bin/sh -c) in the process's working directory.",
		Schema: schema.MustTool[abi.ShellTool]()},
		abi.ShellExec.Name, func(raw json.RawMessage) (json.RawMessage, error) {
			var a map[string]any
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, fmt.Errorf("tool arguments are not a JSON object: %v", err)
			}
			if c, ok := a["command"]; ok {
				a["input"] = c
				delete(a, "command")
			}
			return json.Marshal(a)
		}},
	// IPC with the owner's other processes: the source is the calling
	// process (its identity's Pid), never claimed.
	{model.ToolDef{Name: "Processes", Description: "List your owner's processes: pid, label, profile, state.",
		Schema: schema.MustTool[abi.NoToolArgs]()},
		abi.ProcList.Name, func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }},
	{model.ToolDef{Name: "Mail", Description: "Send a message to another process of your owner; it does not answer you.",
		Schema: schema.MustTool[abi.MailTool]()},
		abi.ProcIpcSend.Name, passArgs},
	{model.ToolDef{Name: "Call", Description: "Ask another process of your owner; its final answer arrives later in this conversation as a [Process Event]: ipc.reply (or ipc.timeout after timeoutMs, default 60000).",
		Schema: schema.MustTool[abi.CallTool]()},
		abi.ProcIpcCall.Name, passArgs},
	{model.ToolDef{Name: "Delegate", Description: "Hand a task to a new worker process (profile default task); its answer arrives later in this conversation as a [Process Event]: ipc.reply.",
		Schema: schema.MustTool[abi.DelegateTool]()},
		abi.ProcIpcDelegate.Name, passArgs},
	{model.ToolDef{Name: "Runs", Description: "List the runs under way or parked of your owner's processes: state, step, budget, the checkpoint they wait at.",
		Schema: schema.MustTool[abi.NoToolArgs]()},
		abi.ProcRunList.Name, func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }},
	{model.ToolDef{Name: "Direct", Description: "Decide a checkpoint of another process's run: {type:continue, effects:[{op:extend-budget,usd|tokens|turns|timeMs}, {op:inject-message,role,content}, {op:swap-model,model}, {op:set-temperature,temp}, {op:set-tool-cap,n}]} or {type:abort,reason}, or the sugar {type:refocus,hint}.",
		Schema: schema.MustTool[abi.DirectTool]()},
		abi.ProcDirective.Name, passArgs},
	{model.ToolDef{Name: "Watch", Description: "Be told (a [Process Event]: signal) when another process of your owner publishes a signal, such as proc.run.finished; once by default.",
		Schema: schema.MustTool[abi.WatchTool]()},
		abi.SignalWatch.Name, passArgs},
	// Mcp is every MCP server of the owner's as one tool: the model
	// searches their tools (sys.mcp.tools: names, descriptions, schemas),
	// then calls one (sys.mcp.call, which asks approval per server and
	// tool). No server's schemas fill the tool list.
	{model.ToolDef{Name: "Mcp", Description: mcpToolDoc,
		Schema: schema.MustTool[abi.McpTool]()},
		abi.SysMcpCall.Name, mcpCallArgs},
	// Skill loads a skill's body (proc/skills.go); runTool makes its
	// reads itself, as the process.
	{model.ToolDef{Name: skillToolName, Description: skillToolDoc,
		Schema: schema.MustTool[abi.SkillTool]()},
		abi.FsReadraw.Name, passArgs},
	// CodeMode runs a block whose shell and fs calls are this process's
	// tool calls (proc/codemode.go).
	{model.ToolDef{Name: "CodeMode", Description: codeModeTool,
		Schema: schema.MustTool[abi.CodeModeTool]()},
		abi.CodemodeExec.Name, func(raw json.RawMessage) (json.RawMessage, error) {
			var a abi.CodeModeExecArgs
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, fmt.Errorf("tool arguments: %v", err)
			}
			return json.Marshal(a)
		}},
}

// mcpToolDoc is the Mcp tool's description.
const mcpToolDoc = "Use the tools of your owner's MCP servers (listed in your instructions). " +
	"{search: \"words\"} finds tools by name and description and gives their input schemas (add server to search one server); " +
	"{server, tool, arguments} calls one and returns its result ({content, structuredContent, isError}; a result over 1 MiB is a blob with a preview and the path of the whole). " +
	"A call needs your owner's approval for that server and tool unless remembered."

// mcpRoute makes the Mcp tool's syscall: a search (sys.mcp.tools, at
// most 10 tools) without a tool, else a call (sys.mcp.call).
func mcpRoute(raw json.RawMessage) (string, json.RawMessage, error) {
	var a abi.McpTool
	if err := abi.DecodeArgs(raw, &a); err != nil {
		return "", nil, fmt.Errorf("Mcp: %v", err)
	}
	if a.Tool == "" {
		b, err := json.Marshal(abi.McpToolsArgs{ServerID: a.Server, Query: a.Search, Limit: 10})
		return abi.SysMcpTools.Name, b, err
	}
	b, err := mcpCallArgs(raw)
	return abi.SysMcpCall.Name, b, err
}

// mcpCallArgs are the args of the Mcp tool's call: sys.mcp.call's.
func mcpCallArgs(raw json.RawMessage) (json.RawMessage, error) {
	var a abi.McpTool
	if err := abi.DecodeArgs(raw, &a); err != nil {
		return nil, fmt.Errorf("Mcp: %v", err)
	}
	if a.Server == "" || a.Tool == "" {
		return nil, fmt.Errorf("Mcp: a call names its server and tool")
	}
	var timeout *int64
	if a.TimeoutMs > 0 {
		timeout = &a.TimeoutMs
	}
	return json.Marshal(abi.McpCallArgs{ServerID: a.Server, Name: a.Tool, Arguments: a.Arguments, TimeoutMs: timeout})
}

// toolAllowed says whether pr's tools (a package profile's narrowing)
// include the agent tool name.
func (m *engine) toolAllowed(ctx context.Context, pr *process, name string) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	ts := m.controlLocked(ctx, pr).Tools
	return len(ts) == 0 || slices.Contains(ts, name)
}

func toolByName(name string) *tool {
	for i := range tools {
		if tools[i].def.Name == name {
			return &tools[i]
		}
	}
	return nil
}

// awaitShell polls the shell session of a command that outran
// shell.exec's wait budget until it ends, and returns its whole result:
// the Shell tool answers the model with the command's end, as the model
// has no tool to poll. The output is what each poll returned, joined, its
// tail kept as shell.exec keeps it; an abort ends the polling (the command
// runs on to its own timeout).
func (m *engine) awaitShell(ctx context.Context, caller *kernel.Caller, sh *abi.ShellExecResult) (*abi.ShellExecResult, error) {
	var out strings.Builder
	out.WriteString(sh.Output)
	truncated := sh.Truncated
	for sh.Status == "running" {
		next, err := kernel.Do(ctx, m.k, caller, abi.ShellExec, &abi.ShellExecArgs{SessionID: sh.SessionID})
		if err != nil {
			return nil, err
		}
		sh = next
		out.WriteString(sh.Output)
		truncated = truncated || sh.Truncated
	}
	whole := *sh
	whole.Output, whole.Truncated = out.String(), truncated
	if n := len(whole.Output); n > shellOutputMax {
		whole.Output, whole.Truncated = strings.ToValidUTF8(whole.Output[n-shellOutputMax:], ""), true
	}
	return &whole, nil
}

// shellOutputMax is the most output of one command the Shell tool gives
// the model: shell.exec's own cap on one result.
const shellOutputMax = 200_000

// dataRoots are the directories of the data tree: files in them are
// data, and writing one runs nothing.
var dataRoots = []string{"/home", "/workspaces", "/var/sessions"}

// approval is the approval policy: the approval a tool call needs, named
// as it is remembered, or "" for none. shell.exec and fs.delete ask a
// human ("shell.exec", "fs.delete"). A write, edit or delete of a path
// outside the data tree asks too, remembered per path ("fs.write
// /proc/p_1/ctl"): a ctl or call file of the namespace runs syscalls as
// the owner, so an unasked write there could make any call that asks a
// human (a shell.exec frame written to /sys/call, an "hil ... approve"
// line written to a process's ctl). The path is resolved as the device
// resolves it (~ is home, a relative path is under cwd); a write that
// names no path fails by itself and asks nothing.
func approval(syscall string, args json.RawMessage, home, cwd string) string {
	switch syscall {
	case abi.ShellExec.Name:
		return syscall
	case abi.SysMcpCall.Name:
		// Remembered per server and tool: "sys.mcp.call everything echo".
		var a abi.McpCallArgs
		json.Unmarshal(args, &a)
		return syscall + " " + a.ServerID + " " + a.Name
	case abi.FsWrite.Name, abi.FsEdit.Name, abi.FsDelete.Name:
	default:
		return ""
	}
	var a struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(args, &a) != nil || a.Path == "" {
		if syscall == abi.FsDelete.Name {
			return syscall
		}
		return "" // no path: the call fails as it is, writing nothing
	}
	p := a.Path
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		p = home + p[1:]
	case !strings.HasPrefix(p, "/"):
		p = path.Join(cwd, p)
	}
	p = path.Clean(p)
	for _, root := range dataRoots {
		if p == root || strings.HasPrefix(p, root+"/") {
			if syscall == abi.FsDelete.Name {
				return syscall
			}
			return ""
		}
	}
	return syscall + " " + p
}

// processCaller is the caller a process's calls are made as (its run's
// tool calls, its CodeMode blocks' nested calls): its owner's identity
// with the process's cwd, workspace and pid, narrowed by the process's
// narrowing (a run narrows it further by its conversation's:
// actingCaller).
func (m *engine) processCaller(ctx context.Context, p *abi.Process) (*kernel.Caller, error) {
	id, err := m.k.IdentityOf(ctx, p.Uid)
	if err != nil {
		return nil, err
	}
	id.Cwd = p.Cwd
	id.WorkspaceID = p.WorkspaceID
	id.Pid = p.Pid
	id.Process = p.Cap
	return &kernel.Caller{Identity: id}, nil
}

// execute runs r until it finishes, fails, or waits on a human. It
// returns the run's status: done, error, aborted or waiting_hil.
func (m *engine) execute(ctx context.Context, pr *process, r *activeRun) (string, error) {
	p, err := m.get(ctx, pr.pid)
	if err != nil {
		return "error", err
	}
	caller, err := m.processCaller(ctx, p)
	if err != nil {
		return "error", err
	}
	if err := m.restoreCheck(ctx, pr, r); err != nil {
		return "error", err
	}
	for steps := 0; ; {
		if ctx.Err() != nil {
			return "aborted", nil
		}
		calls, err := pendingCalls(ctx, m.st, pr.pid, r.cid, r.gen)
		if err != nil {
			return "error", err
		}
		if len(calls) > 0 {
			for _, c := range calls {
				if capped, err := m.toolCapped(ctx, pr, r, c); capped || err != nil {
					if errors.Is(err, errStale) || ctx.Err() != nil {
						return "aborted", nil
					}
					if err != nil {
						return "error", err
					}
					continue
				}
				// The call acts within what its conversation carries now.
				acting, err := m.actingCaller(ctx, caller, pr.pid, r.cid, r.gen)
				waiting := false
				if err == nil {
					waiting, err = m.runToolCheckin(ctx, pr, r, p, acting, c)
				}
				if errors.Is(err, errStale) || ctx.Err() != nil {
					return "aborted", nil
				}
				if err != nil {
					return "error", err
				}
				if waiting {
					return "waiting_hil", nil // runTool stored the waiting state
				}
			}
			continue
		}
		var role string
		err = m.st.QueryRowContext(ctx, `SELECT role FROM proc_messages WHERE pid=? AND cid=? AND generation=? ORDER BY id DESC LIMIT 1`, pr.pid, r.cid, r.gen).Scan(&role)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			if ctx.Err() != nil {
				return "aborted", nil
			}
			return "error", err
		}
		if role == "assistant" {
			return "done", nil
		}
		if steps >= m.opts.MaxSteps {
			m.processEvent(ctx, pr, r, fmt.Sprintf("run stopped after %d model calls", steps))
			return "error", fmt.Errorf("run stopped after %d model calls", steps)
		}
		if !m.opts.noCheckpoints {
			if status, err := m.atCheckpoint(ctx, pr, r, steps == 0); status != "" || err != nil {
				if ctx.Err() != nil {
					return "aborted", nil
				}
				if err != nil {
					return "error", err
				}
				return status, nil
			}
		}
		steps++
		msgs, err := m.preflight(ctx, pr, r, p)
		if err != nil {
			if ctx.Err() != nil {
				// An abort (or Close) during preflight is not a
				// refusal to record in the conversation.
				return "aborted", nil
			}
			m.processEvent(ctx, pr, r, "run refused: "+err.Error())
			return "error", err
		}
		t0 := time.Now()
		resp, err := m.callModel(ctx, pr, r, p, caller, msgs)
		if ctx.Err() != nil {
			return "aborted", nil
		}
		if err != nil {
			// Visible in the conversation; the user's message is kept.
			m.processEvent(ctx, pr, r, "model error: "+err.Error())
			return "error", err
		}
		m.account(ctx, pr, r, modelCall{provider: r.provider, model: r.model, in: int64(resp.Usage.InputTokens),
			out: int64(resp.Usage.OutputTokens), reportedUSD: resp.Usage.CostUSD, took: time.Since(t0)})
		seen := map[string]bool{}
		for i := range resp.ToolCalls {
			// A call id is unique within the run, because HIL answers
			// are found by (run, call id). Providers that number their
			// calls (the scripted one, some local servers) reuse ids,
			// e.g. after a restart: a reused id would be taken as already
			// approved (or denied) and run without asking.
			used := false
			if id := resp.ToolCalls[i].ID; id != "" && !seen[id] {
				if used, err = m.callIDUsed(ctx, pr.pid, r.id, id); err != nil {
					return "error", err
				}
			}
			if id := resp.ToolCalls[i].ID; id == "" || seen[id] || used {
				resp.ToolCalls[i].ID = newID("call_")
			}
			seen[resp.ToolCalls[i].ID] = true
			if len(resp.ToolCalls[i].Args) == 0 || !json.Valid(resp.ToolCalls[i].Args) {
				resp.ToolCalls[i].Args = json.RawMessage("{}")
			}
		}
		b, err := json.Marshal(assistantContent{Text: resp.Text, ToolCalls: resp.ToolCalls})
		if err != nil {
			return "error", err
		}
		if _, err := m.appendGuarded(ctx, pr.pid, r, "assistant", b); err != nil {
			if errors.Is(err, errStale) {
				return "aborted", nil
			}
			return "error", err
		}
		signal(m, pr.uid, abi.SigProcRunOutput, abi.RunOutput{Pid: pr.pid, RunID: r.id, ConversationID: r.cid, Text: resp.Text, ToolCalls: len(resp.ToolCalls)})
	}
}

// callIDUsed says whether run runID of pid already asked a human about a
// tool call with id callID.
func (m *engine) callIDUsed(ctx context.Context, pid, runID, callID string) (bool, error) {
	var n int
	err := m.st.QueryRowContext(ctx, `SELECT count(*) FROM proc_hil WHERE pid=? AND run_id=? AND call_id=?`, pid, runID, callID).Scan(&n)
	return n > 0, err
}

// appendGuarded appends a message to r's conversation if r is still the
// conversation's live run: same generation, run still running.
func (m *engine) appendGuarded(ctx context.Context, pid string, r *activeRun, role string, content json.RawMessage) (int64, error) {
	var id int64
	err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
		var gen int64
		var status string
		if err := m.st.TxQueryRow(tx, `SELECT c.generation, r.status FROM proc_conversations c, proc_runs r WHERE c.pid=? AND c.cid=? AND r.run_id=?`, pid, r.cid, r.id).Scan(&gen, &status); errors.Is(err, sql.ErrNoRows) {
			return errStale
		} else if err != nil {
			return err
		}
		if gen != r.gen || (status != "running" && status != "waiting_hil") {
			return errStale
		}
		t := now()
		err := m.st.TxQueryRow(tx, `INSERT INTO proc_messages(pid,cid,generation,role,content,created_at) VALUES(?,?,?,?,?,?) RETURNING id`, pid, r.cid, r.gen, role, string(content), t).Scan(&id)
		if err != nil {
			return err
		}
		_, err = m.st.TxExec(tx, `UPDATE proc_conversations SET updated_at=? WHERE pid=? AND cid=?`, t, pid, r.cid)
		return err
	})
	return id, err
}

// processEvent appends a visible "[Process Event]:" system message; a run
// that is no longer live appends nothing.
func (m *engine) processEvent(ctx context.Context, pr *process, r *activeRun, text string) {
	_, err := m.appendGuarded(context.WithoutCancel(ctx), pr.pid, r, "system", jsonString(EventPrefix+text))
	if err != nil && !errors.Is(err, errStale) {
		m.log.Error("proc: append a process event", "pid", pr.pid, "run", r.id, "err", err)
	}
}

// runTool runs one tool call: asks a human first when the policy says so
// (returning waiting=true once the request and the run's waiting state
// are stored), then makes the syscall as the process and appends the
// result. An answered request decides the call: approved runs it (with
// the edited args, if the human edited them), denied and expired give
// the model a refusal, substituted gives it the human's text.
func (m *engine) runTool(ctx context.Context, pr *process, r *activeRun, p *abi.Process, caller *kernel.Caller, c model.ToolCall) (waiting bool, err error) {
	t := toolByName(c.Name)
	var mark hilResultContent // what a human's answer changed, stored with the result
	var media []abi.MediaRef  // the images the tool gave, stored
	result := func(out string, isErr bool) error {
		mark.toolResultContent = toolResultContent{ToolCallID: c.ID, ToolName: c.Name, Output: out, IsError: isErr, Media: media}
		b, err := json.Marshal(mark)
		if err != nil {
			return err
		}
		_, err = m.appendGuarded(ctx, pr.pid, r, "toolResult", b)
		signal(m, pr.uid, abi.SigProcRunToolFinished, abi.ToolFinished{Pid: pr.pid, RunID: r.id, ConversationID: r.cid, CallID: c.ID, ToolName: c.Name, IsError: isErr})
		return err
	}
	if t == nil || !m.toolAllowed(ctx, pr, c.Name) {
		return false, result(fmt.Sprintf("unknown tool %q", c.Name), true)
	}
	if t.def.Name == skillToolName { // reads only: no approval
		return false, result(m.skillTool(ctx, caller, p.Cwd, c.Args))
	}
	syscall := t.syscall
	var args json.RawMessage
	var aerr error
	if route := toolRoutes[t.def.Name]; route != nil {
		syscall, args, aerr = route(c.Args)
	} else {
		args, aerr = t.args(c.Args)
	}
	if aerr != nil {
		return false, result(aerr.Error(), true)
	}
	// A call the owner may not make is refused before anyone is asked.
	if err := m.k.Permit(caller, syscall); err != nil {
		return false, result(err.Error(), true)
	}
	ask := false
	need := approval(syscall, args, caller.Home, caller.Cwd)
	if need != "" {
		ok, err := m.allowed(ctx, pr.pid, need)
		if err != nil {
			return false, err
		}
		ask = !ok
	}
	note := ""
	if ask {
		ans, err := m.answerOf(ctx, pr.pid, r.id, c.ID)
		switch {
		case err != nil:
			return false, err
		case ans.status == "":
			if err := m.askHil(ctx, pr, r, m.hilRequest(ctx, pr, r, c.ID, c.Name, need, args)); err != nil {
				return false, err
			}
			return true, nil
		case ans.status == "pending":
			// The run waits on its pending request (already marked so
			// unless the store was written otherwise).
			if _, err := m.st.Exec(ctx, `UPDATE proc_runs SET status='waiting_hil' WHERE run_id=? AND status='running'`, r.id); err != nil {
				return false, err
			}
			return true, nil
		case ans.status == "denied":
			return false, result(resultDenied, true)
		case ans.status == "expired":
			return false, result(resultExpired, true)
		case ans.status == "substituted":
			mark.Substituted = true
			return false, result(ans.result, false)
		case ans.status == "stale":
			return false, result(resultInterrupted, true)
		case ans.edited != nil:
			// approved, with edited args: they run, and the result says so.
			args, note = ans.edited, editedNote(ans.edited)
			mark.Args, mark.ArgsDigest, mark.Edited = ans.edited, ans.editedDigest, true
		}
		// approved: run it.
	}
	signal(m, pr.uid, abi.SigProcRunToolStarted, abi.ToolStarted{Pid: pr.pid, RunID: r.id, ConversationID: r.cid, CallID: c.ID, ToolName: c.Name, Syscall: syscall})
	var callArgs any = args
	callCtx := ctx
	if syscall == abi.CodemodeExec.Name {
		// An Internal syscall takes its Go args, not a frame's JSON. The
		// block's nested calls that need a human ask as part of this call.
		var a abi.CodeModeExecArgs
		if err := kernel.DecodeArgs(args, &a); err != nil {
			return false, result(err.Error(), true)
		}
		callArgs = &a
		callCtx = context.WithValue(ctx, blockKey{}, &blockCall{pr: pr, r: r, callID: c.ID})
	}
	res, err := m.k.Call(callCtx, caller, syscall, callArgs)
	if sh, ok := res.(*abi.ShellExecResult); ok && err == nil && sh.Status == "running" {
		res, err = m.awaitShell(ctx, caller, sh)
	}
	if ctx.Err() != nil {
		return false, errStale // abort writes the resultInterrupted result
	}
	if err != nil {
		return false, result(note+err.Error(), true)
	}
	if fr, ok := res.(*abi.FSReadResult); ok && fr.Image != nil {
		// An image file: its bytes go to the owner's media store, the
		// result names them, and the model gets the image.
		refs, err := m.storeImage(ctx, pr.uid, fr.Image, path.Base(fr.Path))
		if err != nil {
			return false, result(note+err.Error(), true)
		}
		media = refs
		res = imageReadResult{OK: true, Path: fr.Path, Size: fr.Size, Image: refs[0]}
	}
	out, err := json.Marshal(res)
	if err != nil {
		return false, result(note+err.Error(), true)
	}
	isErr := failed(res, nil) != nil
	if cm, ok := res.(*abi.CodeModeResult); ok {
		isErr = cm.Status != codemode.StatusCompleted
	}
	return false, result(note+string(out), isErr)
}

// systemPrompt is the profile's prompt, the process's assignment (its
// context files) and the owner's ~/context.d/*.md.
func (m *engine) systemPrompt(ctx context.Context, p *abi.Process, caller *kernel.Caller) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are a GSV agent process (pid %s, profile %s) acting for user %s. Your working directory is %s.\n",
		p.Pid, p.Profile, caller.Username, p.Cwd)
	b.WriteString("Your tools are syscalls made with your owner's permissions. Messages that start with \"[Process Event]:\" are GSV runtime events (compaction summaries, errors, scheduled events, IPC replies and timeouts, watched signals), not the user speaking. Other processes of your owner may write to you (Message from process ..., Call ... from process ...): for a call, your final answer of that run goes back to the caller. You may write to them too: Processes, Mail, Call, Delegate, Watch.\n")
	m.devicesPrompt(ctx, &b, caller)
	m.mcpPrompt(ctx, &b, caller)
	m.budgetPrompt(ctx, &b, p)
	m.assignmentPrompt(ctx, &b, p.Pid)
	m.skillsPrompt(ctx, &b, caller, p.Cwd)
	dir, err := kernel.Do(ctx, m.k, caller, abi.FsRead, &abi.FSReadArgs{Path: "~/context.d"})
	if err != nil || !dir.OK || !dir.Dir {
		return b.String()
	}
	files := dir.Files
	sort.Strings(files)
	for _, f := range files {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		raw, err := kernel.Do(ctx, m.k, caller, abi.FsReadraw, &abi.FileArgs{Path: "~/context.d/" + f})
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n%s\n", f, raw)
	}
	return b.String()
}

// devicesPrompt lists the online devices the caller may use and what each
// serves, for the tools' target: a prompt is free, so a failed list
// leaves the section out.
func (m *engine) devicesPrompt(ctx context.Context, b *strings.Builder, caller *kernel.Caller) {
	res, err := kernel.Do(ctx, m.k, caller, abi.SysDeviceList, &abi.DeviceListArgs{})
	if err != nil || len(res.Devices) == 0 {
		return
	}
	b.WriteString("Devices you may use: give a tool's target as the device's id to run it there (paths and commands are then the device's own; ~ is its user's home). Without a target a tool runs on this machine.\n")
	for _, d := range res.Devices {
		fmt.Fprintf(b, "- %s (%s): %s\n", d.DeviceID, d.Platform, strings.Join(d.Implements, " "))
	}
}

// mcpPrompt names the owner's MCP servers, with how many tools each
// has, for the Mcp tool: names only, never their tools' schemas (the
// model searches for what it needs). It reads what the servers' last
// discovery kept and asks no server.
func (m *engine) mcpPrompt(ctx context.Context, b *strings.Builder, caller *kernel.Caller) {
	res, err := kernel.Do(ctx, m.k, caller, abi.SysMcpList, &abi.McpListArgs{})
	if err != nil || len(res.Servers) == 0 {
		return
	}
	b.WriteString("Your owner's MCP servers (search and call their tools with the Mcp tool):")
	for _, s := range res.Servers {
		fmt.Fprintf(b, " %s (%d tools)", s.Name, len(s.Tools))
	}
	b.WriteString(".\n")
}

// toolDefs are the tools' definitions, as a model request lists them.
var toolDefs = func() []model.ToolDef {
	defs := make([]model.ToolDef, len(tools))
	for i, t := range tools {
		defs[i] = t.def
	}
	return defs
}()

// callModel makes one model call for r as caller (the process),
// streaming deltas to the events. msgs are the conversation's model
// messages if the preflight read them, else nil.
func (m *engine) callModel(ctx context.Context, pr *process, r *activeRun, p *abi.Process, caller *kernel.Caller, msgs []model.Message) (model.Response, error) {
	prov, modelName, err := m.provider(ctx, p.Uid)
	if err != nil {
		return model.Response{}, err
	}
	if msgs == nil {
		if msgs, _, err = m.modelMessages(ctx, pr.uid, pr.pid, r.cid, r.gen); err != nil {
			return model.Response{}, err
		}
	}
	req := model.Request{Model: modelName, System: m.systemPrompt(ctx, p, caller), Messages: msgs, Tools: m.toolDefsFor(ctx, caller)}
	pr.mu.Lock()
	ctl := m.controlLocked(ctx, pr)
	if ctl.Model != "" || ctl.Temp != nil {
		if ctl.Model != "" {
			req.Model = ctl.Model // swap-model, or a package profile's
		}
		req.Temperature = ctl.Temp
	}
	if len(ctl.Tools) > 0 { // a package profile's tools
		req.Tools = slices.DeleteFunc(slices.Clone(req.Tools), func(d model.ToolDef) bool { return !slices.Contains(ctl.Tools, d.Name) })
	}
	pr.mu.Unlock()
	r.provider, r.model = prov.Name(), req.Model
	if r.model == "" {
		r.model = "default"
	}
	return prov.Complete(ctx, req, func(text string) {
		signal(m, pr.uid, abi.SigProcRunStream, abi.RunText{Pid: pr.pid, RunID: r.id, ConversationID: r.cid, Text: text})
		chatSignal(m, pr.uid, r.id, abi.SigChatDelta, abi.RunText{Pid: pr.pid, RunID: r.id, ConversationID: r.cid, Text: text}, false)
	})
}

// preflight applies the conversation's context policy before a model call:
// auto-compact compacts when the estimated pressure passes the threshold;
// fail refuses the run. It returns the conversation's model messages when
// it read them and left them as they are (nil otherwise), so that the
// model call need not read them again.
func (m *engine) preflight(ctx context.Context, pr *process, r *activeRun, p *abi.Process) ([]model.Message, error) {
	pol, err := m.policy(ctx, pr.pid, r.cid)
	if err != nil {
		return nil, err
	}
	if pol.Overflow == "manual" {
		return nil, nil
	}
	msgs, size, err := m.modelMessages(ctx, pr.uid, pr.pid, r.cid, r.gen)
	if err != nil {
		return nil, err
	}
	window := 128000
	cfg, _ := m.aiConfig(ctx, p.Uid)
	if s, err := strconv.Atoi(cfg["context_window"]); err == nil && s > 0 {
		window = s
	}
	pressure := float64(size/4) / float64(window)
	if pressure < pol.CompactAtPressure {
		return msgs, nil
	}
	if pol.Overflow == "fail" {
		return nil, fmt.Errorf("context pressure %.2f is over %.2f and the policy is fail", pressure, pol.CompactAtPressure)
	}
	if _, err := m.compact(ctx, p, r.cid, abi.CompactArgs{KeepLast: &pol.KeepLast, GenerateSummary: true}, true, nil); err != nil {
		if abi.Code(err) != 400 || size/4 > window {
			return nil, err
		}
		return msgs, nil // nothing to compact, and it fits the window
	}
	// What the compaction kept must fit the window, or the model call
	// fails (or is cut) at the provider: the run stops here instead.
	msgs, size, err = m.modelMessages(ctx, pr.uid, pr.pid, r.cid, r.gen)
	if err != nil {
		return nil, err
	}
	if size/4 > window {
		return nil, fmt.Errorf("context is still over the window after compaction: about %d tokens kept (keep=%d), the window is %d: compact more (keep=<n>) or raise config/ai/context_window", size/4, pol.KeepLast, window)
	}
	return msgs, nil
}

// decodeAs returns a function that decodes a syscall's result (res, err)
// into v through its JSON, the form every caller of the syscall sees: a
// caller that reads another room's result needs only its JSON shape.
func decodeAs(res any, err error) func(v any) error {
	return func(v any) error {
		if err != nil {
			return err
		}
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, v)
	}
}

// failed is the error of a syscall's result (res, err): err, or the
// result's own error when it says {"ok": false, "error": ...}.
func failed(res any, err error) error {
	if err != nil {
		return err
	}
	var r struct {
		OK    *bool  `json:"ok"`
		Error string `json:"error"`
	}
	if decodeAs(res, nil)(&r) != nil || r.OK == nil || *r.OK {
		return nil
	}
	return errors.New(r.Error)
}

package mcpserve

import (
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/abi/schema"
)

// tool is one syscall the server offers as an MCP tool, and whether it
// only reads (the tool's readOnlyHint).
type tool struct {
	desc abi.Desc
	read bool
}

// tools are the syscalls that make sense to a remote agent: the routed
// file calls (each with its target), commands and exec sessions, agent
// processes, schedules, CodeMode and the devices. Each is offered to a
// caller that may make it (sys.syscall.list); the dispatcher decides
// every call all the same. process.exec and process.blob.read are the
// sessions' own (a session runs nothing without process.exec, and large
// output is a blob), proc.list finds the pids the proc tools take.
var tools = []tool{
	{abi.FsRead, true},
	{abi.FsWrite, false},
	{abi.FsEdit, false},
	{abi.FsDelete, false},
	{abi.FsSearch, true},
	{abi.ShellExec, false},
	{abi.ProcessSessionOpen, false},
	{abi.ProcessExec, false},
	{abi.ProcessSessionSignal, false},
	{abi.ProcessSessionList, true},
	{abi.ProcessSessionGet, true},
	{abi.ProcessSessionWait, true},
	{abi.ProcessBlobRead, true},
	{abi.ProcList, true},
	{abi.ProcSpawn, false},
	{abi.ProcSend, false},
	{abi.ProcHistory, true},
	{abi.ProcStatus, true},
	{abi.ProcDirective, false},
	{abi.SchedList, true},
	{abi.SchedAdd, false},
	{abi.SchedUpdate, false},
	{abi.SchedRemove, false},
	{abi.SchedRun, false},
	{abi.SchedCrontabGet, true},
	{abi.SchedCrontabSet, false},
	{abi.SchedLog, true},
	{abi.CodemodeRun, false},
	{abi.SysDeviceList, true},
}

// Tools returns the names of the syscalls the server offers as tools
// (to each caller those it may make; tools/list sorts them by name).
func Tools() []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.desc.CallName()
	}
	return names
}

// toolDefs are the MCP tools of the table, made once: each syscall's
// name, its doc as the description, the JSON Schema of its args as the
// input schema (abi/schema, from its descriptor's args type).
var toolDefs = sync.OnceValues(func() ([]*mcp.Tool, error) {
	defs := make([]*mcp.Tool, 0, len(tools))
	for _, t := range tools {
		s, err := schema.Of(t.desc)
		if err != nil {
			return nil, err
		}
		if s.Args.Type != "object" {
			return nil, fmt.Errorf("%s: args schema is a %q, not an object", t.desc.CallName(), s.Args.Type)
		}
		in := s.Args
		in.Description = "" // the tool's own description says it
		def := &mcp.Tool{Name: t.desc.CallName(), Description: t.desc.CallDoc(), InputSchema: in}
		if t.read {
			def.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
		}
		defs = append(defs, def)
	}
	return defs, nil
})

package mcpserve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

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
		if err := noBooleanSchemas(in); err != nil {
			return nil, fmt.Errorf("%s: %w", t.desc.CallName(), err)
		}
		def := &mcp.Tool{Name: t.desc.CallName(), Description: t.desc.CallDoc(), InputSchema: in}
		if t.read {
			def.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
		}
		defs = append(defs, def)
	}
	return defs, nil
})

// anyValue is the schema of any JSON value, written as an object: the
// schema library writes an empty schema as the boolean schema true,
// which JSON Schema allows but clients refuse in a tool's input schema
// (the TypeScript SDK's, and so the inspector's: "Invalid input" at
// .properties.args of codemode.run).
func anyValue() *jsonschema.Schema { return &jsonschema.Schema{Description: "any JSON value"} }

// noBooleanSchemas replaces each schema under s that would be written as
// true with anyValue. It replaces pointers rather than changing the
// schemas they point to, which the schema library may share.
func noBooleanSchemas(s *jsonschema.Schema) error {
	var err error
	fix := func(c **jsonschema.Schema) {
		if *c == nil || err != nil {
			return
		}
		b, merr := json.Marshal(*c)
		if merr != nil {
			err = merr
			return
		}
		if bytes.Equal(b, []byte("true")) {
			*c = anyValue()
			return
		}
		if e := noBooleanSchemas(*c); e != nil {
			err = e
		}
	}
	for k, c := range s.Properties {
		fix(&c)
		s.Properties[k] = c
	}
	for k, c := range s.Defs {
		fix(&c)
		s.Defs[k] = c
	}
	fix(&s.Items)
	fix(&s.AdditionalProperties)
	for _, list := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf, s.AllOf, s.PrefixItems} {
		for i := range list {
			fix(&list[i])
		}
	}
	return err
}

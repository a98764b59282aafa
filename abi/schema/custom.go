package schema

import (
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"gsvfs.dev/gsvfs/abi"
)

// customType is an abi type with its own JSON: schema turns the schema
// of its fields (plain) into the schema of what its methods write or read.
type customType struct {
	t      reflect.Type
	schema func(plain *jsonschema.Schema, opts *jsonschema.ForOptions) (*jsonschema.Schema, error)
}

// custom lists the abi types whose JSON is their own. TestCustom checks
// each schema against values the type marshals.
var custom = []customType{
	// An operation's own failure is {ok:false, error}; its success has
	// the fields.
	{reflect.TypeFor[abi.FSWriteResult](), orFailed},
	{reflect.TypeFor[abi.FSEditResult](), orFailed},
	{reflect.TypeFor[abi.FSDeleteResult](), orFailed},
	{reflect.TypeFor[abi.FSSearchResult](), orFailed},
	{reflect.TypeFor[abi.ShellExecResult](), orFailed},
	// A failure, a directory's listing or a file's lines, each with
	// exactly its own keys.
	{reflect.TypeFor[abi.FSReadResult](), func(_ *jsonschema.Schema, opts *jsonschema.ForOptions) (*jsonschema.Schema, error) {
		type listing struct {
			Directories []string `json:"directories"`
			Files       []string `json:"files"`
			OK          bool     `json:"ok"`
			Path        string   `json:"path"`
		}
		type file struct {
			Content string `json:"content"`
			Lines   int    `json:"lines"`
			OK      bool   `json:"ok"`
			Path    string `json:"path"`
			Size    int64  `json:"size"`
		}
		l, err := jsonschema.For[listing](opts)
		if err != nil {
			return nil, err
		}
		f, err := jsonschema.For[file](opts)
		if err != nil {
			return nil, err
		}
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{failedSchema(), l, f}}, nil
	}},
	// A page of history: its MarshalJSON writes the fields (pendingHil
	// null rather than absent on a page by offset), which the fields'
	// schema admits.
	{reflect.TypeFor[abi.HistoryResult](), func(plain *jsonschema.Schema, _ *jsonschema.ForOptions) (*jsonschema.Schema, error) {
		return plain, nil
	}},
	// A workspace is the object or, as a ctl line gives it, its mode
	// alone.
	{reflect.TypeFor[abi.WorkspaceSpec](), func(plain *jsonschema.Schema, _ *jsonschema.ForOptions) (*jsonschema.Schema, error) {
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{{Type: "string"}, plain}}, nil
	}},
}

// orFailed is the operation's own failure or plain.
func orFailed(plain *jsonschema.Schema, _ *jsonschema.ForOptions) (*jsonschema.Schema, error) {
	return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{failedSchema(), plain}}, nil
}

// failedSchema is the schema of {ok:false, error}.
func failedSchema() *jsonschema.Schema {
	var f any = false
	return &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"ok":    {Const: &f},
			"error": {Type: "string"},
		},
		PropertyOrder:        []string{"ok", "error"},
		Required:             []string{"ok", "error"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
}

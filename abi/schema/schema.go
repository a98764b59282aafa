// Package schema makes the JSON Schema of abi types: of each syscall's
// args and result (from its abi.Desc) and of any abi record, such as the
// agent's tool arguments. The schemas are inferred from the Go types by
// github.com/google/jsonschema-go (the library the MCP Go SDK uses), so a
// type is the one source of both its JSON and its schema.
//
// It is a package of its own, beside abi rather than in it, so that abi
// stays a leaf that imports nothing but the standard library: the device
// daemon and the CLI link abi without the schema library.
//
// The schemas follow encoding/json: a property is named by its json tag;
// a field tagged omitempty (or omitzero) is optional and every other
// field is required (a pointer, slice or map may then be null); a struct
// admits no other property. A field's `jsonschema:"..."` tag is its
// description (the library reads no Go doc comments). json.RawMessage is
// any JSON value. The few abi types whose JSON is written by their own
// MarshalJSON or read by their own UnmarshalJSON have their schema
// written here (custom), checked against values they marshal; a type
// with its own JSON that is not listed is an error, never a wrong schema.
package schema

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"gsvfs.dev/gsvfs/abi"
)

// Syscall is what a syscall's schema file shows: the JSON Schema of its
// args object and of its result.
type Syscall struct {
	Args   *jsonschema.Schema `json:"args"`
	Result *jsonschema.Schema `json:"result"`
}

// ErrInternal is the error Of returns for an abi.Internal syscall: its
// args and result are Go values that no request frame carries.
var ErrInternal = errors.New("an internal syscall takes and returns Go values, not JSON")

// Of returns the schemas of the syscall d's args and result. The args
// schema's description is d's doc. A result that is a pointer is
// described by the record it points to: a handler answers a record (an
// MCP tool's output schema is an object).
func Of(d abi.Desc) (*Syscall, error) {
	if d.CallFlags()&abi.Internal != 0 {
		return nil, fmt.Errorf("%s: %w", d.CallName(), ErrInternal)
	}
	args, err := For(d.ArgsType())
	if err != nil {
		return nil, fmt.Errorf("%s: args: %w", d.CallName(), err)
	}
	args.Description = d.CallDoc()
	rt := d.ResultType()
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	res, err := For(rt)
	if err != nil {
		return nil, fmt.Errorf("%s: result: %w", d.CallName(), err)
	}
	return &Syscall{Args: args, Result: res}, nil
}

// For returns the JSON Schema of the values of type t as encoding/json
// writes them and abi.DecodeArgs reads them. Each call returns a new
// schema, which the caller may change.
func For(t reflect.Type) (*jsonschema.Schema, error) {
	opts, err := options()
	if err != nil {
		return nil, err
	}
	if err := checkCustom(t, map[reflect.Type]bool{}, opts.TypeSchemas); err != nil {
		return nil, err
	}
	s, err := jsonschema.ForType(t, opts)
	if err != nil {
		return nil, err
	}
	fixNullAnyOf(s)
	return s, nil
}

// ForType is For of the type T.
func ForType[T any]() (*jsonschema.Schema, error) { return For(reflect.TypeFor[T]()) }

// known are the types that have their own JSON whose schema the library
// knows (its own table) or that this package writes (custom).
var known = map[reflect.Type]bool{
	reflect.TypeFor[time.Time]():       true,
	reflect.TypeFor[slog.Level]():      true,
	reflect.TypeFor[big.Int]():         true,
	reflect.TypeFor[big.Rat]():         true,
	reflect.TypeFor[big.Float]():       true,
	reflect.TypeFor[json.RawMessage](): true,
}

var (
	marshaler     = reflect.TypeFor[json.Marshaler]()
	unmarshaler   = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// ownJSON reports whether values of t are written or read by their own
// methods rather than by their fields.
func ownJSON(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(marshaler) || p.Implements(marshaler) || p.Implements(unmarshaler) ||
		t.Implements(textMarshaler) || p.Implements(textMarshaler)
}

// checkCustom walks t as encoding/json does and fails on a type with its
// own JSON whose schema is neither the library's nor in custom: the
// library would infer it from fields that are not its JSON.
func checkCustom(t reflect.Type, seen map[reflect.Type]bool, schemas map[reflect.Type]*jsonschema.Schema) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if seen[t] || known[t] || schemas[t] != nil {
		return nil
	}
	seen[t] = true
	if t.Kind() != reflect.Interface && ownJSON(t) {
		return fmt.Errorf("%s has its own JSON encoding: write its schema in abi/schema's custom table", t)
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return checkCustom(t.Elem(), seen, schemas)
	case reflect.Struct:
		for _, f := range reflect.VisibleFields(t) {
			if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct {
				continue // an embedded struct's fields are visited as its own
			}
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == "-" {
				continue
			}
			if err := checkCustom(f.Type, seen, schemas); err != nil {
				return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
			}
		}
	}
	return nil
}

// fixNullAnyOf rewrites what the library makes of a pointer to a type
// whose schema is an anyOf (custom): it adds the null to the schema's
// types, which then admit nothing but a null that no branch admits. The
// null becomes a branch of its own.
func fixNullAnyOf(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.AnyOf) > 0 && len(s.Types) == 1 && s.Types[0] == "null" {
		s.Types = nil
		s.AnyOf = append([]*jsonschema.Schema{{Type: "null"}}, s.AnyOf...)
	}
	for _, c := range s.AnyOf {
		fixNullAnyOf(c)
	}
	for _, c := range s.Properties {
		fixNullAnyOf(c)
	}
	fixNullAnyOf(s.Items)
	fixNullAnyOf(s.AdditionalProperties)
}

// options are the library's options: the schemas of json.RawMessage and
// of the custom types, made once.
var options = sync.OnceValues(func() (*jsonschema.ForOptions, error) {
	opts := &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		// Any JSON value.
		reflect.TypeFor[json.RawMessage](): {},
	}}
	for _, c := range custom {
		// The fields' schema, which c.schema turns into the JSON the
		// type's own methods write or read.
		plain, err := jsonschema.ForType(c.t, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.t, err)
		}
		s, err := c.schema(plain, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.t, err)
		}
		opts.TypeSchemas[c.t] = s
	}
	return opts, nil
})

// Tool returns the JSON Schema of a model tool's arguments of type T, as
// compact JSON: For's, without additionalProperties anywhere (a model is
// shown what to give; the tool's syscall decodes strictly and refuses
// anything else with a message naming it).
func Tool[T any]() (json.RawMessage, error) {
	s, err := ForType[T]()
	if err != nil {
		return nil, err
	}
	dropAdditional(s)
	b, err := json.Marshal(s)
	if err == nil && s.Type == "object" && len(s.Properties) == 0 {
		// A tool with no arguments says so, as providers want it:
		// properties {} (the library leaves an empty map out).
		b = append(b[:len(b)-1], `,"properties":{}}`...)
	}
	return b, err
}

// MustTool is Tool for the tool tables built when a package starts: a
// type without a schema is a programming error, and it panics.
func MustTool[T any]() json.RawMessage {
	b, err := Tool[T]()
	if err != nil {
		panic(fmt.Sprintf("schema.MustTool[%s]: %v", reflect.TypeFor[T](), err))
	}
	return b
}

// dropAdditional removes additionalProperties from s and every schema in
// it.
func dropAdditional(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.AdditionalProperties = nil
	for _, c := range s.Properties {
		dropAdditional(c)
	}
	for _, c := range s.AnyOf {
		dropAdditional(c)
	}
	dropAdditional(s.Items)
}

package schema_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/abi/schema"
)

// validate checks the JSON text doc against s.
func validate(t *testing.T, s *jsonschema.Schema, doc string) error {
	t.Helper()
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return rs.Validate(v)
}

// marshal is v's JSON, as a client sends it or the kernel answers it.
func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A syscall's args schema admits the args a client sends (the CLI's
// marshalled abi args, the JSON a user types) and refuses what the
// dispatcher refuses (an unknown field, a wrong type); its result schema
// admits what the handler's result marshals to.
func TestSyscallSchemas(t *testing.T) {
	uid := uint32(1000)
	label := "ci"
	cases := []struct {
		d      abi.Desc
		good   []string
		bad    []string
		result any
	}{
		{d: abi.SysWhoami, good: []string{`{}`, marshal(t, abi.WhoamiArgs{})}, bad: []string{`{"x":1}`, `[]`},
			result: &abi.WhoamiResult{Capabilities: []string{"*"}, Role: "user",
				Process: abi.ProcessIdentity{Uid: 0, Username: "root", Home: "/home/root", Cwd: "/home/root", Gids: []uint32{0}}}},
		{d: abi.SysConfigGet, good: []string{`{}`, `{"key":"config/ai/provider"}`, marshal(t, abi.ConfigGetArgs{Key: "a/b"})},
			bad:    []string{`{"key":1}`, `{"prefix":"a"}`},
			result: &abi.ConfigGetResult{Entries: []abi.ConfigEntry{{Key: "a/b", Value: "c"}}}},
		{d: abi.SysConfigSet, good: []string{`{"key":"a/b","value":"x"}`, `{"key":"a/b","value":{"n":[1,2]}}`, marshal(t, abi.ConfigSetArgs{Key: "k", Value: json.RawMessage(`3`)})},
			bad: []string{`{"value":"x"}`, `{"key":"a","value":1,"other":2}`}},
		{d: abi.SysUserAdd, good: []string{marshal(t, abi.UserAddArgs{Username: "bob", Gecos: "Bob"}), `{"username":"bob","hostUid":1002,"gecos":"","uid":null}`},
			bad:    []string{`{"username":"bob","hostUid":"x","gecos":"","uid":null}`, `{"username":"bob","hostUid":-1,"gecos":"","uid":null,"home":"/"}`},
			result: &abi.User{Uid: 1000, Gid: 100, Username: "bob", Home: "/home/bob"}},
		{d: abi.SysTokenCreate, good: []string{marshal(t, abi.TokenCreateArgs{Kind: "user", Label: &label, Uid: &uid})}},
		{d: abi.SysSyscallList, good: []string{`{}`}, bad: []string{`{"all":true}`},
			result: &abi.SyscallListResult{Syscalls: []string{"sys.whoami"}}},
	}
	for _, c := range cases {
		t.Run(c.d.CallName(), func(t *testing.T) {
			s, err := schema.Of(c.d)
			if err != nil {
				t.Fatal(err)
			}
			if s.Args.Description != c.d.CallDoc() || s.Args.Description == "" {
				t.Errorf("args description %q, want the doc %q", s.Args.Description, c.d.CallDoc())
			}
			for _, g := range c.good {
				if err := validate(t, s.Args, g); err != nil {
					t.Errorf("args %s refused: %v", g, err)
				}
				// The dispatcher takes it too.
				if err := abi.DecodeArgs(json.RawMessage(g), reflect.New(c.d.ArgsType()).Interface()); err != nil {
					t.Errorf("args %s: the dispatcher refuses it: %v", g, err)
				}
			}
			for _, b := range c.bad {
				if err := validate(t, s.Args, b); err == nil {
					t.Errorf("args %s admitted", b)
				}
			}
			if c.result != nil {
				if err := validate(t, s.Result, marshal(t, c.result)); err != nil || s.Result.Type != "object" {
					t.Errorf("result %s refused: %v", marshal(t, c.result), err)
				}
			}
		})
	}
}

// Required and optional follow the json tags: a field tagged omitempty
// is optional, every other field required; names are the tags'.
func TestRequired(t *testing.T) {
	for _, c := range []struct {
		t        reflect.Type
		required []string
		props    []string
	}{
		{reflect.TypeFor[abi.FSReadArgs](), []string{"path"}, []string{"target", "path", "offset", "limit", "raw"}},
		{reflect.TypeFor[abi.SpawnArgs](), []string{"profile"}, nil},
		{reflect.TypeFor[abi.UserAddArgs](), []string{"username"}, nil},
		{reflect.TypeFor[abi.ConfigSetArgs](), []string{"key", "value"}, nil},
		{reflect.TypeFor[abi.TokenRevokeArgs](), []string{"tokenId"}, nil},
	} {
		s, err := schema.For(c.t)
		if err != nil {
			t.Fatalf("%s: %v", c.t, err)
		}
		if !slices.Equal(s.Required, c.required) {
			t.Errorf("%s: required %q, want %q", c.t, s.Required, c.required)
		}
		if c.props != nil && !slices.Equal(s.PropertyOrder, c.props) {
			t.Errorf("%s: properties %q, want %q", c.t, s.PropertyOrder, c.props)
		}
	}
}

// The abi types with their own JSON have schemas that admit what they
// marshal (and, for args, what they unmarshal), through a pointer too.
func TestCustom(t *testing.T) {
	exit := 0
	cases := []struct {
		t     reflect.Type
		good  []any    // values whose JSON the schema admits
		goodJ []string // JSON texts it admits
		bad   []string
	}{
		{t: reflect.TypeFor[abi.FSReadResult](), good: []any{
			abi.FSReadResult{Error: "no such file"},
			abi.FSReadResult{OK: true, Dir: true, Path: "/home/a"},
			abi.FSReadResult{OK: true, Dir: true, Path: "/home/a", Files: []string{"x"}, Directories: []string{"d"}},
			abi.FSReadResult{OK: true, Path: "/home/a/x", Content: "     1\thi\n", Lines: 1, Size: 3},
		}, bad: []string{`{"ok":true,"path":"/a","files":[],"directories":[],"content":"x"}`, `{"ok":false}`}},
		{t: reflect.TypeFor[abi.FSWriteResult](), good: []any{abi.FSWriteResult{Error: "denied"}, abi.FSWriteResult{OK: true, Path: "/a", Size: 3}},
			bad: []string{`{"ok":true}`}},
		{t: reflect.TypeFor[abi.FSEditResult](), good: []any{abi.FSEditResult{Error: "x"}, abi.FSEditResult{OK: true, Path: "/a", Replacements: 2}}},
		{t: reflect.TypeFor[abi.FSDeleteResult](), good: []any{abi.FSDeleteResult{Error: "x"}, abi.FSDeleteResult{OK: true, Path: "/a"}}},
		{t: reflect.TypeFor[abi.FSSearchResult](), good: []any{abi.FSSearchResult{Error: "x"}, abi.FSSearchResult{OK: true},
			abi.FSSearchResult{OK: true, Count: 1, Matches: []abi.FSMatch{{Path: "/a", Line: 1, Content: "x"}}}}},
		{t: reflect.TypeFor[abi.ShellExecResult](), good: []any{abi.ShellExecResult{Error: "no such device"},
			abi.ShellExecResult{Status: "completed", Output: "hi\n", ExitCode: &exit}, abi.ShellExecResult{Status: "running", SessionID: "s1"}}},
		{t: reflect.TypeFor[abi.HistoryResult](), good: []any{
			abi.HistoryResult{OK: true, Pid: "p1", ConversationID: "default", Messages: []abi.Message{{ID: 1, Role: "user", Content: json.RawMessage(`"hi"`)}}},
			abi.HistoryResult{OK: true, Pid: "p1", MessageCount: new(int64(1)), Truncated: new(false)},
		}},
		{t: reflect.TypeFor[abi.SpawnArgs](), good: []any{abi.SpawnArgs{Profile: "task"}, abi.SpawnArgs{Profile: "task", Workspace: &abi.WorkspaceSpec{Mode: "none"}}},
			goodJ: []string{`{"profile":"task","workspace":"inherit"}`, `{"profile":"task","workspace":null}`, `{"profile":"task","workspace":{"mode":"new","label":"x"}}`},
			bad:   []string{`{"profile":"task","workspace":3}`, `{"profile":"task","workspace":{"mode":"none","x":1}}`}},
	}
	for _, c := range cases {
		s, err := schema.For(c.t)
		if err != nil {
			t.Fatalf("%s: %v", c.t, err)
		}
		ps, err := schema.For(reflect.PointerTo(c.t))
		if err != nil {
			t.Fatalf("*%s: %v", c.t, err)
		}
		for _, v := range c.good {
			j := marshal(t, v)
			if err := validate(t, s, j); err != nil {
				t.Errorf("%s: %s refused: %v", c.t, j, err)
			}
			if err := validate(t, ps, j); err != nil {
				t.Errorf("*%s: %s refused: %v", c.t, j, err)
			}
		}
		if err := validate(t, ps, `null`); err != nil {
			t.Errorf("*%s: null refused: %v", c.t, err)
		}
		for _, j := range c.goodJ {
			if err := validate(t, s, j); err != nil {
				t.Errorf("%s: %s refused: %v", c.t, j, err)
			}
		}
		for _, j := range c.bad {
			if err := validate(t, s, j); err == nil {
				t.Errorf("%s: %s admitted", c.t, j)
			}
		}
	}
}

// ownJSON has its own MarshalJSON, as a new abi type might.
type ownJSON struct{ X int }

func (ownJSON) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

// A type with its own JSON that the custom table does not list is an
// error naming it, never a schema of its fields; an internal syscall has
// no schema.
func TestRefused(t *testing.T) {
	type holder struct {
		Own []ownJSON `json:"own"`
	}
	_, err := schema.For(reflect.TypeFor[holder]())
	if err == nil || !strings.Contains(err.Error(), "schema_test.ownJSON has its own JSON encoding") {
		t.Errorf("a type with its own JSON: %v", err)
	}
	if _, err := schema.Of(abi.SysEvents); !errors.Is(err, schema.ErrInternal) {
		t.Errorf("an internal syscall: %v", err)
	}
}

package ns

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

func TestParseCtl(t *testing.T) {
	tests := []struct {
		line string
		want CtlLine
		err  bool
	}{
		{"send hello world\n", CtlLine{Verb: "send", Words: []string{"hello", "world"}, Rest: "hello world"}, false},
		{"spawn task label=researcher prompt='say ''hi'' now'", CtlLine{Verb: "spawn", Words: []string{"task"},
			Opts: map[string]string{"label": "researcher", "prompt": "say 'hi' now"}, Rest: "task label=researcher prompt='say ''hi'' now'"}, false},
		{"abort", CtlLine{Verb: "abort"}, false},
		{"  kill  noarchive ", CtlLine{Verb: "kill", Words: []string{"noarchive"}, Rest: "noarchive "}, false},
		{"'a=b' x", CtlLine{Verb: "'a=b'", Words: []string{"x"}, Rest: "x"}, false},
		{"set {\"key\":\"a\"}", CtlLine{Verb: "set", Rest: "{\"key\":\"a\"}", JSON: json.RawMessage(`{"key":"a"}`)}, false},
		{"{\"key\":\"a\"}", CtlLine{JSON: json.RawMessage(`{"key":"a"}`)}, false},
		{"set {bad", CtlLine{}, true},
		{"", CtlLine{}, true},
		{"\n", CtlLine{}, true},
		{"send 'open", CtlLine{}, true},
		{"send a\x00b", CtlLine{}, true},
		{"send \xff", CtlLine{}, true},
	}
	for _, tt := range tests {
		got, err := ParseCtl(tt.line)
		got.read = nil // bookkeeping of the verbs, not the parse
		if (err != nil) != tt.err {
			t.Errorf("%q: err %v", tt.line, err)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q:\n got %#v\nwant %#v", tt.line, got, tt.want)
		}
	}
}

func FuzzParseCtl(f *testing.F) {
	for _, s := range []string{"send hello", "spawn task label=x prompt='a ''b'''", "set {\"key\":\"k\"}", "{}", "'", "a=b c='d",
		"open network=full network=none", "x a=1 'a=2' a=3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseCtl(s)
		if err != nil {
			if abi.Code(err) != 400 {
				t.Fatalf("error of code %d: %v", abi.Code(err), err)
			}
			return
		}
		if l.Verb == "" && l.JSON == nil {
			t.Fatalf("no verb and no JSON for %q", s)
		}
		if l.JSON != nil && !json.Valid(l.JSON) {
			t.Fatalf("invalid JSON kept for %q", s)
		}
		// Every option given more than once is known as such (checkOpts
		// refuses it where a verb reads it), once.
		for i, k := range l.dup {
			if _, ok := l.Opts[k]; !ok || slices.Index(l.dup, k) != i {
				t.Fatalf("%q: dup %q", s, l.dup)
			}
		}
	})
}

// A ctl line's key=value options and JSON args are as strict as a frame's
// args: one the verb does not read is a 400 naming it, and nothing runs.
// testOpt is the syscall the tests' ctl verbs make.
var testOpt = abi.Call[abi.ConfigGetArgs, string]{Name: "fs.testopt", Grant: abi.Users}

func TestCtlUnknownOption(t *testing.T) {
	e := kerneltest.Open(t)
	k, alice := e.K, e.Alice
	s := New(k)
	ctx := context.Background()
	ran := 0
	k.Register(kernel.Handle(testOpt, func(ctx context.Context, c *kernel.Caller, a *abi.ConfigGetArgs) (string, error) {
		ran++
		return a.Key, nil
	}))
	ctl := s.Ctl("/test", RootMeta("/test/ctl", 0o666), testVerbs())
	for _, tc := range []struct {
		line, want, err string
	}{
		{"get key=a", `"a"`, ""},
		{"get key=a uid=0", "", `fs.testopt: /test/ctl: unknown option "uid"`},
		{"get {\"key\":\"b\"}", `"b"`, ""},
		{"get {\"key\":\"b\",\"uid\":0}", "", `fs.testopt: /test/ctl: unknown field "uid"`},
		{"say a=b c", `"a=b c"`, ""},
		// Repeated options are refused where the verb reads them
		// (network=full network=none: which one?); in free text they
		// are words (issue 20, item 18).
		{"get key=a key=b", "", `fs.testopt: /test/ctl: option "key" is given more than once`},
		{"get key=a key=a", "", `fs.testopt: /test/ctl: option "key" is given more than once`},
		{"say a=b a=c", `"a=b a=c"`, ""},
		// A verb that takes no words refuses them, as it refuses an
		// unknown option.
		{"bare", `""`, ""},
		{"bare now", "", `fs.testopt: /test/ctl: usage: bare`},
	} {
		before := ran
		out, err := ctl.Exec(ctx, alice, tc.line)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err || abi.Code(err) != 400 || ran != before {
				t.Errorf("%q: got %q, %v (ran %d times), want 400 %q", tc.line, out, err, ran-before, tc.err)
			}
			continue
		}
		if err != nil || out != tc.want {
			t.Errorf("%q: got %q, %v, want %q", tc.line, out, err, tc.want)
		}
	}
}

// testVerbs are the verbs of the ctl files of these tests: get reads the
// option key, say takes its line as text, bare takes nothing; each makes
// the syscall fs.testopt.
func testVerbs() map[string]CtlVerb {
	return map[string]CtlVerb{
		"get": func(l CtlLine) (kernel.Bound, error) {
			return kernel.Bind(testOpt, &abi.ConfigGetArgs{Key: l.Opt("key")}), nil
		},
		"say": func(l CtlLine) (kernel.Bound, error) {
			return kernel.Bind(testOpt, &abi.ConfigGetArgs{Key: l.Text()}), nil
		},
		"bare": func(l CtlLine) (kernel.Bound, error) {
			return kernel.Bind(testOpt, &abi.ConfigGetArgs{}), l.Args(0, 0, "bare")
		},
	}
}

// FuzzCtlExec: a line of a ctl file either runs its syscall once or is
// refused with a 400 and runs nothing: a refused line changes nothing. A
// line that gives an option its verb reads twice, or words to a verb
// that takes none, is refused.
func FuzzCtlExec(f *testing.F) {
	for _, s := range []string{"get key=a", "get key=a key=b", "get key=a uid=0", "say a=b a=b", "bare", "bare x",
		"bare {}", "get {\"key\":\"k\",\"key\":\"j\"}", "get 'key=a' key=b", "nope", "get key='a b' key=''"} {
		f.Add(s)
	}
	e := kerneltest.Open(f)
	k, alice := e.K, e.Alice
	s := New(k)
	ran := 0
	k.Register(kernel.Handle(testOpt, func(ctx context.Context, c *kernel.Caller, a *abi.ConfigGetArgs) (string, error) {
		ran++
		return a.Key, nil
	}))
	ctl := s.Ctl("/test", RootMeta("/test/ctl", 0o666), testVerbs())
	f.Fuzz(func(t *testing.T, line string) {
		before := ran
		_, err := ctl.Exec(context.Background(), alice, line)
		if err != nil {
			if abi.Code(err) != 400 || ran != before {
				t.Fatalf("%q: %v (code %d), ran %d times", line, err, abi.Code(err), ran-before)
			}
			return
		}
		if ran != before+1 {
			t.Fatalf("%q: succeeded, ran %d times", line, ran-before)
		}
		l, perr := ParseCtl(line)
		if perr != nil {
			t.Fatalf("%q runs but does not parse: %v", line, perr)
		}
		if l.JSON == nil && (l.Verb == "get" && slices.Contains(l.dup, "key") || l.Verb == "bare" && len(l.Words) > 0) {
			t.Fatalf("%q runs", line)
		}
	})
}

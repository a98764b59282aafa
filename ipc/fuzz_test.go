package ipc

import (
	"slices"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/ns"
)

// The IPC verbs of a process's ctl never panic; a line they take names a
// target and carries its text as written, the end of the line.
func FuzzIPCVerbs(f *testing.F) {
	for _, s := range []string{
		"mail p_1 please review ~/notes.md",
		"call p_2 timeout=60000 summarize timeout=3 things",
		"call p_2 timeout=1m x",
		"delegate task timeout=300000 label=flaky find the flaky test",
		"watch proc.run.finished process=p_3 once ttl=10s",
		"unwatch key=k", "unwatch watch_1", "mail", "call p timeout=abc x", `mail p "quoted text"`,
		`{"pid":"p","message":"m"}`, "mail {\"pid\":\"p\"}",
		"call p timeout=1s timeout=2s x", "delegate task label=a label=b do it", "watch s process=a process=b",
		"delegate task pid=p1 pid=p2 x", "call p x timeout=1s timeout=2s",
	} {
		f.Add(s)
	}
	verbs := ipcVerbs("p_src")
	f.Fuzz(func(t *testing.T, line string) {
		l, err := ns.ParseCtl(line)
		if err != nil {
			return
		}
		v, ok := verbs[l.Verb]
		if !ok {
			return
		}
		b, err := v(l)
		call, args := b.Name(), b.Args()
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("%q: an error of kind %v, want a 400: %v", line, abi.KindOf(err), err)
			}
			return
		}
		// A leading option given twice is refused, never read as one of
		// its values.
		if l.JSON == nil && (l.Verb == "call" || l.Verb == "delegate") {
			// The words are split as SplitLead splits them: at blanks and tabs.
			ws := strings.FieldsFunc(l.Rest, func(r rune) bool { return r == ' ' || r == '\t' })
			seen := map[string]bool{}
			for _, w := range ws[min(1, len(ws)):] {
				k, _, ok := strings.Cut(w, "=")
				if !ok || !slices.Contains([]string{"timeout", "label", "pid"}, k) {
					break
				}
				if seen[k] {
					t.Fatalf("%q: the leading option %s is given twice, and the line is taken", line, k)
				}
				seen[k] = true
			}
		}
		if call == "" || args == nil {
			t.Fatalf("%q: no call", line)
		}
		if l.JSON != nil {
			return
		}
		text := strings.TrimRight(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), "")
		switch a := args.(type) {
		case *abi.IpcSendArgs:
			if a.Pid == "" || a.Message == "" || !strings.HasSuffix(text, a.Message) || a.SourcePid != "p_src" {
				t.Fatalf("%q: mail %+v", line, a)
			}
		case *abi.IpcCallArgs:
			if a.Pid == "" || a.Message == "" || !strings.HasSuffix(text, a.Message) || a.SourcePid != "p_src" {
				t.Fatalf("%q: call %+v", line, a)
			}
		case *abi.IpcDelegateArgs:
			if a.Profile == "" || a.Task == "" || !strings.HasSuffix(text, a.Task) {
				t.Fatalf("%q: delegate %+v", line, a)
			}
		case *abi.WatchArgs:
			if a.Signal == "" || a.WatcherPid != "p_src" {
				t.Fatalf("%q: watch %+v", line, a)
			}
		}
	})
}

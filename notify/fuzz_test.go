package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/ns"
)

// FuzzCtlLine: any line of /var/notify/ctl either fails with a 400 or
// becomes args whose notification, if create accepts it, holds a
// one-line title and a level of the four, and renders as JSON that
// reads back the same.
func FuzzCtlLine(f *testing.F) {
	for _, s := range []string{
		"create title=hi", "create hello world level=warning", "create title='a ''b''' body='x y' ttl=90s",
		"read abc", "dismiss abc", "create {\"title\":\"t\",\"actions\":[{\"kind\":\"k\",\"label\":\"l\"}]}",
		"create title=\x1b[2J", "create level=loud x", "create a title=b", "create x ttl=-5h", "read", "",
	} {
		f.Add(s)
	}
	verbs := ctlVerbs()
	f.Fuzz(func(t *testing.T, line string) {
		l, err := ns.ParseCtl(line)
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("parse %q: %v", line, err)
			}
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
				t.Fatalf("%q: %v", line, err)
			}
			return
		}
		a, ok := args.(*abi.NotificationCreateArgs)
		if !ok {
			if call != "notification.mark_read" && call != "notification.dismiss" {
				t.Fatalf("%q: call %s args %T", line, call, args)
			}
			return
		}
		if l.JSON != nil {
			if err := abi.DecodeArgs(l.JSON, a); err != nil {
				return
			}
		}
		n, err := normalize(a)
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("%q: %v", line, err)
			}
			return
		}
		if n.Title == "" || strings.IndexFunc(n.Title, unicode.IsControl) >= 0 || !levels[n.Level] {
			t.Fatalf("%q: accepted %+v", line, n)
		}
		out, err := render(n)
		if err != nil {
			t.Fatalf("%q: render: %v", line, err)
		}
		var back abi.Notification
		if err := json.Unmarshal(out, &back); err != nil || back.Title != n.Title || back.Body != n.Body {
			t.Fatalf("%q: rendering %s reads back %+v (%v)", line, out, back, err)
		}
	})
}

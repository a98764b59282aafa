package devices

import (
	"bufio"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// FuzzHello: whatever a device says first, readHello returns a hello it
// checked (a valid id, implements only routable syscalls) or a 400, and
// never panics.
func FuzzHello(f *testing.F) {
	for _, s := range []string{
		abi.DeviceMagic + `{"id":"laptop","token":"gsv_node_x","platform":"linux/amd64","version":"1","implements":["fs.read","shell.exec"]}` + "\n",
		abi.DeviceMagic + `{"id":"../x","token":"t","platform":"p","version":"v","implements":[]}` + "\n",
		abi.DeviceMagic + "{garbage\n", "GSVD", "\x13\x00\x00\x00d", abi.DeviceMagic + `{"id":"a","implements":["sys.user.add"]}` + "\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := readHello(bufio.NewReaderSize(strings.NewReader(s), 4096))
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("readHello(%q): %v, want a 400", s, err)
			}
			return
		}
		if abi.CheckDeviceID(h.ID) != nil {
			t.Fatalf("readHello(%q) accepted id %q", s, h.ID)
		}
		for _, c := range h.Implements {
			if !strings.HasPrefix(c, "fs.") && c != "shell.exec" {
				t.Fatalf("readHello(%q) accepted implements %q", s, c)
			}
		}
	})
}

// FuzzAnswer: whatever a device answers, reading and checking it never
// panics, and an answer the kernel takes holds only names, paths, counts
// and session ids of their forms.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		`{"type":"res","id":"1","ok":true,"data":{"ok":true,"path":"/d","files":["a"],"directories":["b"]}}`,
		`{"type":"res","id":"1","ok":true,"data":{"ok":true,"path":"/d","files":["a\nb"],"directories":[]}}`,
		`{"type":"res","id":"1","ok":true,"data":{"ok":true,"path":"/f","content":"x","lines":1,"size":1099511627776}}`,
		`{"type":"res","id":"1","ok":true,"data":{"status":"running","sessionId":"../x"}}`,
		`{"type":"res","id":"1","ok":true,"data":{"count":1,"ok":true,"matches":[{"path":"/f\u0000","line":-1,"content":""}]}}`,
		`{"type":"res","id":"1","ok":false,"error":{"code":200,"message":"a\nb"}}`,
		`{"ok":true,"data":{"sessions":[{"session_id":"ps_x","last_exec":{"stdout":{"blob":{"blob_ref":"sha256:zz","size_bytes":-1}}}}]}}`,
		`{"ok":true,"data":`, `[]`, `null`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, res := range []any{&abi.FSReadResult{}, &abi.FSSearchResult{}, &abi.ShellExecResult{}, &abi.SessionListResult{}, &abi.FSWriteResult{}} {
			fr, err := readAnswer(strings.NewReader(s), nil, nil, res)
			if err != nil || !fr.OK {
				if fr.Error != nil {
					if m := oneLine(fr.Error.Message, maxErrorText); len(m) > maxErrorText || hasControl(m) {
						t.Fatalf("oneLine(%q) = %q", fr.Error.Message, m)
					}
					answerKind(fr.Error.Code).Errno()
				}
				continue
			}
			if checkAnswer(res) != nil {
				continue
			}
			switch r := res.(type) {
			case *abi.FSReadResult:
				if !r.OK {
					break // a failure: only its error text is kept
				}
				for _, n := range append(append([]string{}, r.Files...), r.Directories...) {
					if checkName("name", n) != nil {
						t.Fatalf("%q: took name %q", s, n)
					}
				}
				if r.Size < 0 || r.Size > MaxAnswer || hasControl(r.Path) {
					t.Fatalf("%q: took %+v", s, r)
				}
			case *abi.ShellExecResult:
				if r.Status == "running" && !validSessionID.MatchString(r.SessionID) {
					t.Fatalf("%q: took session id %q", s, r.SessionID)
				}
			}
		}
	})
}

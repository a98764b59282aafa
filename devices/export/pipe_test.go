package export_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/devices/export"
)

// pipeStart opens the pipe file, writes the request line req, and
// returns the fid and the start's answer.
func pipeStart(t *testing.T, fsys *client.Fsys, req string) (*client.Fid, response) {
	t.Helper()
	fid, err := fsys.Open("pipe", plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fid.Close() })
	if _, err := fid.Write([]byte(req + "\n")); err != nil {
		t.Fatalf("write the request: %v", err)
	}
	buf := make([]byte, 8192)
	n, err := fid.Read(buf)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	var r response
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		t.Fatalf("answer %q: %v", buf[:n], err)
	}
	return fid, r
}

// TestPipe: the pipe file runs a command of a session with its stdin
// and stdout on the open handle: a request, its answer, stdin written,
// stdout read to its end (stdin closed by a write of no bytes), the
// receipt in the session; a bad request and an unknown session are
// error answers; a clunk stops a command that runs.
func TestPipe(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	_, _, fsys := serve(t, export.Options{})
	c := openCall(t, fsys)
	open := func() string {
		d := c.ok("process.session.open", map[string]any{"target": map[string]any{"local": map[string]any{"network_mode": "none"}}})
		sid, _ := d["session_id"].(string)
		if sid == "" {
			t.Fatalf("session.open: %v", d)
		}
		return sid
	}
	req := func(sid string, argv ...string) string {
		b, _ := json.Marshal(map[string]any{"id": "1", "call": "process.exec.pipe", "args": map[string]any{"session_id": sid, "argv": argv}})
		return string(b)
	}

	sid := open()
	fid, r := pipeStart(t, fsys, req(sid, "sh", "-c", "while read l; do echo got:$l; done; echo bye; exit 3"))
	if !r.OK {
		t.Fatalf("start: %+v", r.Error)
	}
	if _, err := fid.Write([]byte("one\ntwo\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := fid.Write(nil); err != nil { // stdin's end
		t.Fatal(err)
	}
	out, err := io.ReadAll(fid)
	if err != nil || string(out) != "got:one\ngot:two\nbye\n" {
		t.Fatalf("stdout %q %v", out, err)
	}
	res := c.ok("process.session.wait", map[string]any{"session_id": sid})
	if res["exit_code"] != float64(3) || res["status"] != "ok" {
		t.Fatalf("receipt: %v", res)
	}

	// Bad requests: another call, args that do not decode, no session.
	for _, tc := range []struct{ req, want string }{
		{`{"id":"1","call":"fs.read","args":{"path":"x"}}`, "process.exec.pipe only"},
		{`{"id":"1","call":"process.exec.pipe","args":{"session_id":"` + sid + `","argv":["true"],"bogus":1}}`, "bogus"},
		{req("ps_nosuch", "true"), "ps_nosuch"},
		{`not json`, ""},
	} {
		_, r := pipeStart(t, fsys, tc.req)
		if r.OK || r.Error == nil || !strings.Contains(r.Error.Message, tc.want) {
			t.Errorf("%s: %+v", tc.req, r)
		}
	}

	// A clunk stops the command, even while a read of its stdout waits.
	sid = open()
	fid, r = pipeStart(t, fsys, req(sid, "sleep", "1000"))
	if !r.OK {
		t.Fatalf("start: %+v", r.Error)
	}
	read := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(fid).ReadByte()
		read <- err
	}()
	fid.Close()
	done := make(chan map[string]any, 1)
	go func() { done <- c.ok("process.session.wait", map[string]any{"session_id": sid}) }()
	select {
	case res := <-done:
		if res["status"] != "signaled" {
			t.Fatalf("the clunked command's receipt: %v", res)
		}
	case <-time.After(time.Minute):
		t.Fatal("a clunk did not stop the command")
	}
	<-read
}

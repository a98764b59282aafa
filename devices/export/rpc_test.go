package export_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"9fans.net/go/plan9"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/export"
)

// TestRPC: the rpc file carries many calls at once on one open fid, each
// answer with its request's id: a shell.exec that waits holds up no
// fs.read behind it, and a cancel frame kills the command of the start it
// names and no other; closing the fid cancels what it runs. The fid stays
// open throughout, as the kernel keeps it for a connection's life.
func TestRPC(t *testing.T) {
	_, root, fsys := serve(t, export.Options{})
	os.WriteFile(filepath.Join(root, "f"), []byte("hello\n"), 0o644)
	fid, err := fsys.Open("rpc", plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()
	r := bufio.NewReader(fid)
	send := func(id, call string, args any) {
		t.Helper()
		b, err := abi.EncodeRequest(id, call, args)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fid.Write(b); err != nil {
			t.Fatalf("write %s: %v", b, err)
		}
	}
	next := func() response { // a read waits for the next answer
		t.Helper()
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the rpc file ended: %v", err)
		}
		var a response
		if err := json.Unmarshal(line, &a); err != nil {
			t.Fatalf("answer %q: %v", line, err)
		}
		return a
	}
	// Two commands that wait, then a read: the read answers first.
	send("a", "shell.exec", map[string]any{"input": "echo $$ > pa; exec sleep 600"})
	send("b", "shell.exec", map[string]any{"input": "echo $$ > pb; exec sleep 600"})
	pa, pb := pidOf(t, filepath.Join(root, "pa")), pidOf(t, filepath.Join(root, "pb"))
	send("c", "fs.read", map[string]any{"path": "f"})
	if a := next(); a.ID != "c" || !a.OK || a.Data["content"] == nil {
		t.Fatalf("the read behind two waiting commands: %+v", a)
	}
	// Cancelling a: its command is killed, b's runs on.
	if _, err := fid.Write(abi.EncodeCancel("a")); err != nil {
		t.Fatal(err)
	}
	gone(t, pa, "the cancelled start")
	if a := next(); a.ID != "a" {
		t.Fatalf("the answer after the cancel: %+v, want a's", a)
	}
	// A malformed line is answered (with no id), and the file goes on.
	fid.Write([]byte("{garbage\n"))
	if a := next(); a.ID != "" || a.OK || a.Error == nil || a.Error.Code != 400 {
		t.Fatalf("a malformed line: %+v", a)
	}
	send("d", "fs.read", map[string]any{"path": "f"})
	if a := next(); a.ID != "d" || !a.OK {
		t.Fatalf("a read after a malformed line: %+v", a)
	}
	// Closing the fid cancels what it still runs.
	fid.Close()
	gone(t, pb, "a start of a closed rpc fid")
}

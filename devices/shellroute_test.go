package devices

import (
	"context"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// A device shell session outlives the kernel as a record: after a
// restart its poll answers failed "Device disconnected", once, to its
// owner only; then the session is unknown.
func TestShellSessionRecordSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := kerneltest.OpenAt(t, dir)
	r, err := New(e.K, Options{Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.K.Store.Exec(context.Background(), `INSERT INTO device_shell_sessions(session_id,device_id,connection_id,uid,failed,updated_at)
		VALUES('sh_laptop1','laptop','dc_x',?,0,?), ('sh_old','laptop','dc_x',?,0,?)`,
		e.Alice.Uid, time.Now().UnixMilli(), e.Alice.Uid, time.Now().Add(-25*time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	r.Close()
	e.K.Close()

	e = kerneltest.OpenAt(t, dir)
	newSpaceOn(t, e)
	poll := func(id *kernel.Identity, sid string) (string, int) {
		res := serve(t, e.K, id, `{"call":"shell.exec","args":{"sessionId":"`+sid+`","input":""}}`)
		if res.OK {
			return string(mustJSON(t, res.Data)), 0
		}
		return res.Error.Message, res.Error.Code
	}
	if out, code := poll(e.Bob, "sh_laptop1"); code != 404 {
		t.Fatalf("bob's poll of alice's device session: %d %s", code, out)
	}
	if out, code := poll(e.Alice, "sh_laptop1"); code != 0 || !strings.Contains(out, `"status":"failed"`) || !strings.Contains(out, "Device disconnected") {
		t.Fatalf("alice's poll after the restart: %d %s", code, out)
	}
	if out, code := poll(e.Alice, "sh_laptop1"); code != 404 {
		t.Fatalf("a second poll: %d %s", code, out)
	}
	if out, code := poll(e.Alice, "sh_old"); code != 404 {
		t.Fatalf("a record past its TTL: %d %s", code, out)
	}
}

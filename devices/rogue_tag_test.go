package devices

import (
	"context"
	"io"
	"strings"
	"testing"

	"9fans.net/go/plan9"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// TestRogueTag: a 9P reply that answers no request the kernel sent (a
// tag no request has, or the call channel's own tags with nothing of it
// in flight) ends the device's connection at once, and a routed call
// then fails with 503 at once. (The kernel's 9P client hung on such a
// reply for ever before: it read it while holding its lock, and every
// later request of the connection, the pings included, waited behind
// it, so the device never went offline.)
func TestRogueTag(t *testing.T) {
	e := newDevEnv(t)
	alice := kerneltest.Caller(e.Alice)
	for _, c := range []struct {
		name string
		tag  uint16
		typ  uint8
	}{
		{"AnRreadOfNoRequest", 4242, plan9.Rread},
		{"AnRwriteOfNoRequest", 17, plan9.Rwrite},
		{"TheChannelsTreadNotSent", chanTagRead, plan9.Rread},
		{"TheChannelsTwriteNotSent", chanTagWrite, plan9.Rwrite},
		{"AnRversionInTheSession", plan9.NOTAG, plan9.Rversion},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "r-tag-" + strings.ToLower(c.name)
			g := &rogue{rpc: true, answer: func(abi.Request) io.Reader { return frameOf(`{}`) }}
			g.dial(t, e, id, e.nodeToken(t, e.Alice, id))
			f := &plan9.Fcall{Type: c.typ, Tag: c.tag, Data: []byte("x"), Msize: 8192, Version: "9P2000"}
			if c.typ == plan9.Rwrite {
				f.Count = 1
			}
			msg, err := f.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.conn.Write(msg); err != nil {
				t.Fatal(err)
			}
			waitCond(t, "the connection ended", func() bool { return e.r.remote(id) == nil })
			_, err = kernel.Do(context.Background(), e.K, alice, abi.FsRead, &abi.FSReadArgs{Target: id, Path: "f"})
			if abi.KindOf(err) != abi.Offline {
				t.Fatalf("a routed call after the connection ended: %v, want a 503", err)
			}
		})
	}
}

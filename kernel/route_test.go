package kernel

import (
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// A routed signal goes to the subscriptions of its connection only, when
// that connection listens; otherwise to its whole audience.
func TestSignalRoute(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	other := *alice // the same user on another connection
	conn := &other
	onConn := k.Subscribe(conn, nil)
	defer onConn.Close()
	elsewhere := k.Subscribe(alice, nil)
	defer elsewhere.Close()
	got := func(s *Subscription) int {
		n := 0
		for {
			if _, ok := s.Poll(); !ok {
				return n
			}
			n++
		}
	}
	Publish(k, abi.SigChatDelta, abi.RunText{RunID: "r1"}, Audience{Uids: []uint32{alice.Uid}, Conn: conn})
	if a, b := got(onConn), got(elsewhere); a != 1 || b != 0 {
		t.Fatalf("routed to a listening connection: it got %d, the other %d; want 1, 0", a, b)
	}
	idle := &Identity{Identity: alice.Identity} // a connection with no subscription
	Publish(k, abi.SigChatDelta, abi.RunText{RunID: "r2"}, Audience{Uids: []uint32{alice.Uid}, Conn: idle})
	if a, b := got(onConn), got(elsewhere); a != 1 || b != 1 {
		t.Fatalf("routed to a connection that does not listen: %d, %d; want the owner's streams (1, 1)", a, b)
	}
}

package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// refusingKernel answers adapter.inbound with the refusal its script
// names for the message id (none: delivered).
type refusingKernel struct {
	refuse map[string]error
	done   chan struct{}
}

func (k *refusingKernel) Done() <-chan struct{} { return k.done }
func (k *refusingKernel) Close() error          { return nil }
func (k *refusingKernel) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	var a abi.AdapterInboundArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	if err := k.refuse[a.Message.MessageID]; err != nil {
		return nil, err
	}
	return json.RawMessage(`{"ok":true,"status":"delivered"}`), nil
}

// TestDeliverRefusals: a message the kernel refuses for good (a 400, a
// 413) is acknowledged (Deliver returns nil) so the platform does not
// hand it out forever; a refusal about the bridge or the moment (401,
// 403, 404, 409, 503) is Deliver's error, so the message comes again.
func TestDeliverRefusals(t *testing.T) {
	k := &refusingKernel{done: make(chan struct{}), refuse: map[string]error{
		"bad":     &KernelError{Code: 400, Message: "message.text: too long"},
		"big":     &KernelError{Code: 413, Message: "too large"},
		"revoked": &KernelError{Code: 401, Message: "token revoked"},
		"denied":  &KernelError{Code: 403, Message: "permission denied"},
		"unknown": &KernelError{Code: 404, Message: "no such account"},
		"busy":    &KernelError{Code: 409, Message: "busy"},
		"down":    &KernelError{Code: 503, Message: "offline"},
	}}
	b := newBridge(Options{Adapter: &fakeAdapter{}, Account: "acct"})
	b.setConn(k)
	for _, tc := range []struct {
		id    string
		final bool
	}{{"ok", true}, {"bad", true}, {"big", true}, {"revoked", false}, {"denied", false}, {"unknown", false}, {"busy", false}, {"down", false}} {
		err := b.Deliver(context.Background(), abi.AdapterMessage{MessageID: tc.id, Surface: abi.AdapterSurface{Kind: "dm", ID: "u"}, Text: "x"})
		var ke *KernelError
		switch {
		case tc.final && err != nil:
			t.Errorf("%s: Deliver = %v, want nil (acknowledged)", tc.id, err)
		case !tc.final && !errors.As(err, &ke):
			t.Errorf("%s: Deliver = %v, want the kernel's refusal", tc.id, err)
		}
	}
}

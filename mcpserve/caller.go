package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"

	"gsvfs.dev/gsvfs/abi"
)

// Caller makes syscalls as one identity through the kernel's one
// dispatcher: a 9P connection's (RPC, gsvfs mcp serve) or a token's
// (the /mcp handler's Frames over the kernel's Serve). It is the only
// way the server does anything.
type Caller interface {
	// Call makes the syscall name with args (a JSON object, or nil for
	// none) and returns its result's JSON. A failure the dispatcher
	// answered (the syscall's, or its refusal) is a *CallError; any other
	// error is the transport's (the connection is gone, ctx ended).
	Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
}

// CallError is a syscall's failure as the dispatcher answered it: the
// response frame's code (abi.Code) and message, which begins with the
// syscall's name ("fs.read: ...").
type CallError struct {
	Code    int
	Message string
}

func (e *CallError) Error() string { return e.Message }

// Frames is a Caller over a function that answers one request frame
// with its response frame: the kernel's Serve for one identity, as
// /sys/call answers a frame. Each call is one frame, encoded with
// abi.EncodeRequest and its answer decoded with abi.DecodeResponse.
type Frames func(ctx context.Context, frame []byte) []byte

// Call implements Caller.
func (f Frames) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	req, err := encodeRequest("1", name, args)
	if err != nil {
		return nil, err
	}
	return decodeAnswer(name, f(ctx, req))
}

// encodeRequest is the request frame of name with args; args that are
// not a JSON object are the caller's error (a 400), as the dispatcher
// would answer them.
func encodeRequest(id, name string, args json.RawMessage) ([]byte, error) {
	if len(args) == 0 {
		args = nil
	}
	var a any
	if args != nil {
		a = args
	}
	req, err := abi.EncodeRequest(id, name, a)
	if err != nil {
		return nil, &CallError{Code: abi.Code(err), Message: err.Error()}
	}
	return req, nil
}

// decodeAnswer returns the data of the response frame b to a call of
// name, or its error as a *CallError. A frame that does not decode is
// an error of the transport.
func decodeAnswer(name string, b []byte) (json.RawMessage, error) {
	var data json.RawMessage
	resp, err := abi.DecodeResponse(b, &data)
	if err != nil {
		return nil, fmt.Errorf("%s: bad response frame: %w", name, err)
	}
	if !resp.OK {
		if resp.Error == nil {
			return nil, &CallError{Code: int(abi.Other), Message: name + ": failed"}
		}
		return nil, &CallError{Code: resp.Error.Code, Message: resp.Error.Message}
	}
	return data, nil
}

package export

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// The call and rpc files: each request line is an abi request frame of a
// routed syscall; each answer an abi response frame, as the kernel's
// /sys/call answers (kernel.Serve). The kernel has stripped the target
// and decided who may make the call; the device checks only the args. An
// answer is at most abi.MaxAnswer bytes: a larger one is an error frame
// (the kernel reads no more of an answer than that).

// handler serves one syscall: it decodes its raw JSON args strictly and
// runs it.
type handler func(ctx context.Context, raw json.RawMessage) (any, error)

// fn is the handler of a method over *A.
func fn[A, R any](f func(context.Context, *A) (R, error)) handler {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		a := new(A)
		if err := abi.DecodeArgs(raw, a); err != nil {
			return nil, err
		}
		return f(ctx, a)
	}
}

// syscalls is the device's table of syscalls.
func (e *Export) syscalls() map[string]handler {
	m := map[string]handler{
		abi.FsRead.Name:   fn(e.read),
		abi.FsWrite.Name:  fn(e.write),
		abi.FsEdit.Name:   fn(e.edit),
		abi.FsDelete.Name: fn(e.delete),
		abi.FsSearch.Name: fn(e.search),
	}
	if e.shell != nil {
		m[abi.ShellExec.Name] = fn(e.exec)
	}
	if e.sessions != nil {
		e.addSessionSyscalls(m)
	}
	return m
}

// serve answers one request frame of the call file with its response
// frame. ctx ends when the handle is closed: the request is then
// cancelled.
func (e *Export) serve(ctx context.Context, cred vfs.Cred, frame []byte) []byte {
	req, err := abi.DecodeRequest(frame)
	var res any
	if err == nil {
		res, err = e.call(ctx, req.Call, req.Args)
	}
	out := abi.EncodeResponse(req.ID, req.Call, res, err)
	if len(out) > abi.MaxAnswer {
		out = abi.EncodeResponse(req.ID, req.Call, nil, abi.E(abi.Op(req.Call), abi.Other, fmt.Sprintf(
			"the answer is more than %d bytes: refused (read such a file through /dev/<id>/fs)", abi.MaxAnswer)))
	}
	return out
}

// frameTag is the rpc file's Tag: a request frame's id, or the id a
// cancel frame names. A line that is not a frame is a request with no
// tag (its answer says what is wrong with it).
func frameTag(line []byte) (string, bool) {
	typ, id, err := abi.FrameTag(line)
	if err != nil {
		return "", false
	}
	return id, typ == abi.CancelType
}

// call makes the syscall name with its raw JSON args: an unknown syscall
// is a 400, a panic a 500, and every error names the syscall
// (abi.WithOp).
func (e *Export) call(ctx context.Context, name string, args json.RawMessage) (res any, err error) {
	h, ok := e.calls[name]
	if !ok {
		return nil, abi.E(abi.Op(name), abi.Invalid, "device does not implement "+name)
	}
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("device syscall panicked", "call", name, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, abi.E(abi.Op(name), abi.Other, fmt.Sprintf("internal error: %v", p))
		}
	}()
	res, err = h(ctx, args)
	if err != nil {
		return nil, abi.WithOp(abi.Op(name), err)
	}
	return res, nil
}

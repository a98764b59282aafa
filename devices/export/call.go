package export

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// The call file: each request line is an abi request frame of a routed
// syscall; each answer an abi response frame, as the kernel's /sys/call
// answers (kernel.Serve). The kernel has stripped the target and decided
// who may make the call; the device checks only the args.

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
	resp := abi.Response{Type: "res", ID: req.ID, OK: err == nil, Data: res}
	if err != nil {
		resp.Data = nil
		resp.Error = &abi.FrameError{Code: abi.Code(err), Message: err.Error()}
	}
	b, merr := json.Marshal(resp)
	if merr != nil {
		b, _ = json.Marshal(abi.Response{Type: "res", ID: req.ID, Error: &abi.FrameError{
			Code: 500, Message: fmt.Sprintf("%s: encoding result: %v", req.Call, merr)}})
	}
	return append(b, '\n')
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

package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Request is a request frame: the syscall Call with its Args (a JSON
// object), and an ID the response carries back. Type is "req" or empty.
type Request struct {
	Type string          `json:"type,omitempty"`
	ID   string          `json:"id,omitempty"`
	Call string          `json:"call"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Response is a response frame: Type "res", the request's ID, and either
// OK with the syscall's result as Data or the Error it failed with.
type Response struct {
	Type  string      `json:"type"`
	ID    string      `json:"id,omitempty"`
	OK    bool        `json:"ok"`
	Data  any         `json:"data,omitempty"`
	Error *FrameError `json:"error,omitempty"`
}

// FrameError is the error of a failed response frame: its Kind as a
// number (Code) and its message, which begins with the syscall's name.
type FrameError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// SignalFrame is the seed's asynchronous push frame (Type "sig"): a
// signal's name, its payload and its sequence number on the bus.
type SignalFrame struct {
	Type    string `json:"type"`
	Signal  string `json:"signal"`
	Payload any    `json:"payload,omitempty"`
	Seq     uint64 `json:"seq"`
}

// DecodeRequest parses one JSON request frame. It accepts a missing type
// (or "req") and id, requires a call name, and requires args, when
// present, to be a JSON object. Its errors are Invalid, with Op "frame".
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) == 0 {
		return r, E(Op("frame"), Invalid, "empty request")
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&r); err != nil {
		return r, E(Op("frame"), Invalid, fmt.Sprintf("malformed request: %v", err))
	}
	if dec.More() {
		return r, E(Op("frame"), Invalid, "malformed request: trailing data after the frame")
	}
	if r.Type != "" && r.Type != "req" {
		return r, E(Op("frame"), Invalid, fmt.Sprintf("frame type %q is not req", r.Type))
	}
	if r.Call == "" {
		return r, E(Op("frame"), Invalid, "request has no call")
	}
	if len(r.Args) > 0 && string(r.Args) != "null" {
		if t := strings.TrimSpace(string(r.Args)); t == "" || t[0] != '{' {
			return r, E(Op(r.Call), Invalid, "args must be a JSON object")
		}
	}
	return r, nil
}

// DecodeArgs decodes a syscall's JSON args object into v strictly: a field
// v does not have is a 400 naming it (`unknown field "uid"`), so a
// misspelt or misplaced argument never runs as if it were absent. Empty
// args and null leave v as it is. The kernel's dispatcher and a device's
// call file both decode with it.
func DecodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return E(Invalid, fmt.Sprintf("unknown field %s", f))
		}
		return E(Invalid, fmt.Sprintf("bad args: %v", err))
	}
	if dec.More() {
		return E(Invalid, "bad args: trailing data after the args object")
	}
	return nil
}

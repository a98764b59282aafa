package abi

import (
	"bytes"
	"encoding/json"
	"errors"
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
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return r, E(Op("frame"), Invalid, "empty request")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) && strings.Contains(se.Error(), "after top-level value") {
			json.NewDecoder(bytes.NewReader(b)).Decode(&r) // the frame before it, for its id
			return r, E(Op("frame"), Invalid, "malformed request: trailing data after the frame")
		}
		return r, E(Op("frame"), Invalid, fmt.Sprintf("malformed request: %v", err))
	}
	if r.Type != "" && r.Type != "req" {
		return r, E(Op("frame"), Invalid, fmt.Sprintf("frame type %q is not req", r.Type))
	}
	if r.Call == "" {
		return r, E(Op("frame"), Invalid, "request has no call")
	}
	if len(r.Args) > 0 && string(r.Args) != "null" {
		if t := bytes.TrimSpace(r.Args); len(t) == 0 || t[0] != '{' {
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

// The frame codec: the one encoding of request and response frames that
// every party uses. The kernel's dispatcher (kernel.Serve) and a device's
// call files (devices/export) decode requests with DecodeRequest and
// answer with EncodeResponse; the kernel's device router writes requests
// with EncodeRequest and EncodeCancel and reads answers with FrameTag and
// DecodeResponse. A frame is one line of JSON: its encoders end it with a
// newline, and JSON never holds a raw one.

// CancelType is the type of a cancel frame: {"type":"cancel","id":ID}
// asks the peer to cancel the request ID it is answering (the request
// then answers with the error its cancellation gives, as a request does
// when its caller is gone). A cancel frame has no answer of its own.
const CancelType = "cancel"

// MaxAnswer is the largest response frame, in bytes, a device sends the
// kernel for one routed call, and the most the kernel reads of one: an
// fs.read of a file at the largest size a device reads (25 MiB) with
// numbered lines of about 40 bytes, with room to spare. A device answers
// a larger result with an error frame instead; the kernel refuses a
// longer answer.
const MaxAnswer = 32 << 20

// EncodeRequest returns the request frame {"type":"req","id":id,
// "call":call,"args":args}, newline-terminated. args is encoded once (a
// json.RawMessage is taken as it is, after a check that it is JSON, its
// newlines between tokens taken out so the frame is one line) and
// must be a JSON object or nothing (nil, null: the frame has no args).
func EncodeRequest(id, call string, args any) ([]byte, error) {
	var raw []byte
	switch a := args.(type) {
	case nil:
	case json.RawMessage:
		if !json.Valid(a) {
			return nil, E(Op(call), Invalid, "args are not JSON")
		}
		raw = bytes.TrimSpace(a)
		if bytes.ContainsAny(raw, "\r\n") {
			// A frame is one line: whitespace between tokens goes
			// (a newline in a string is always escaped in JSON).
			var c bytes.Buffer
			if err := json.Compact(&c, raw); err != nil {
				return nil, E(Op(call), Invalid, "args are not JSON")
			}
			raw = c.Bytes()
		}
	default:
		b, err := json.Marshal(args)
		if err != nil {
			return nil, E(Op(call), Invalid, fmt.Sprintf("encoding args: %v", err))
		}
		raw = b
	}
	if string(raw) == "null" {
		raw = nil
	}
	if len(raw) > 0 && raw[0] != '{' {
		return nil, E(Op(call), Invalid, "args must be a JSON object")
	}
	b := make([]byte, 0, len(`{"type":"req","id":,"call":,"args":}`)+len(id)+len(call)+len(raw)+8)
	b = append(b, `{"type":"req","id":`...)
	b = appendString(b, id)
	b = append(b, `,"call":`...)
	b = appendString(b, call)
	if len(raw) > 0 {
		b = append(b, `,"args":`...)
		b = append(b, raw...)
	}
	return append(b, "}\n"...), nil
}

// EncodeCancel returns the cancel frame of request id, newline-terminated.
func EncodeCancel(id string) []byte {
	b := []byte(`{"type":"` + CancelType + `","id":`)
	b = appendString(b, id)
	return append(b, "}\n"...)
}

// EncodeResponse returns the response frame of request id, a call of
// call, newline-terminated: {"type":"res","id":id,"ok":true,"data":res}
// when err is nil, else {"type":"res","id":id,"ok":false,"error":{"code":
// Code(err),"message":err.Error()}}. A result that does not encode is a
// 500 naming call.
func EncodeResponse(id, call string, res any, err error) []byte {
	resp := Response{Type: "res", ID: id, OK: err == nil, Data: res}
	if err != nil {
		resp.Data = nil
		resp.Error = &FrameError{Code: Code(err), Message: err.Error()}
	}
	b, merr := json.Marshal(resp)
	if merr != nil {
		b, _ = json.Marshal(Response{Type: "res", ID: id, Error: &FrameError{Code: int(Other), Message: fmt.Sprintf("%s: encoding result: %v", call, merr)}})
	}
	return append(b, '\n')
}

// DecodeResponse parses one response frame (its type "res" or absent),
// decoding its data into data, a pointer to the result, when it holds
// any: the Response returned has Data set to data. A frame that is not a
// JSON object of that form is an error (the JSON decoder's: its
// *json.SyntaxError or *json.UnmarshalTypeError, or one naming the
// frame's type).
func DecodeResponse(b []byte, data any) (Response, error) {
	var f struct {
		Type  string      `json:"type"`
		ID    string      `json:"id"`
		OK    bool        `json:"ok"`
		Data  any         `json:"data"`
		Error *FrameError `json:"error"`
	}
	f.Data = data
	if err := json.Unmarshal(b, &f); err != nil {
		return Response{}, err
	}
	if f.Type != "" && f.Type != "res" {
		return Response{}, fmt.Errorf("frame type %q is not res", f.Type)
	}
	return Response{Type: "res", ID: f.ID, OK: f.OK, Data: data, Error: f.Error}, nil
}

// FrameTag returns the type and the id of a frame (a request, a cancel
// or a response) without decoding the rest of it when it begins as the
// encoders of this file begin it ({"type":T,"id":I, both plain strings):
// a reader of many answers finds whose each one is before anything
// decodes it whole. Any other frame is decoded for its "type" and "id"
// (a frame that is not a JSON object with string ones is an error). If
// the frame names a key twice, the first "type" and "id" of a frame of
// the encoders' form count, the last of any other: its full decoding may
// then find another id, which its reader must refuse.
func FrameTag(b []byte) (typ, id string, err error) {
	if typ, id, ok := fastTag(b); ok {
		return typ, id, nil
	}
	var f struct {
		Type *string `json:"type"`
		ID   *string `json:"id"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", "", err
	}
	if f.Type != nil {
		typ = *f.Type
	}
	if f.ID != nil {
		id = *f.ID
	}
	return typ, id, nil
}

// fastTag reads a frame that begins {"type":"T","id":"I", with T and I
// plain: no escapes, no control characters.
func fastTag(b []byte) (typ, id string, ok bool) {
	rest, ok := bytes.CutPrefix(b, []byte(`{"type":"`))
	if !ok {
		return "", "", false
	}
	t, rest, ok := plainString(rest)
	if !ok {
		return "", "", false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"id":"`)); !ok {
		return "", "", false
	}
	i, rest, ok := plainString(rest)
	if !ok || len(rest) == 0 || (rest[0] != ',' && rest[0] != '}') {
		return "", "", false
	}
	return string(t), string(i), true
}

// plainString returns the bytes of b up to its first '"', and what
// follows that quote, if none of them is a '\\', a control character or
// a byte of a character that is not ASCII (JSON would decode those in
// ways the fast path does not: escapes, invalid UTF-8).
func plainString(b []byte) (s, rest []byte, ok bool) {
	for i, c := range b {
		switch {
		case c == '"':
			return b[:i], b[i+1:], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// appendString appends s to b as a JSON string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// frame is one text frame a client sends: a request ("req", its Call
// and Args; Body names the args field the next binary frame fills) or a
// cancel ({"type":"cancel","id":ID}, abi.CancelType).
type frame struct {
	Type string          `json:"type"`
	ID   string          `json:"id"`
	Call string          `json:"call,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
	Body string          `json:"body,omitempty"`
}

// maxID is the longest request id a frame may carry.
const maxID = 256

// errMalformed is the cause of every frame decodeFrame refuses: the
// connection that sent it is closed.
var errMalformed = errors.New("malformed frame")

// decodeFrame parses one text frame. A frame that is not one JSON object
// of the form above (a type other than req or cancel, a request with no
// call or id, args that are not an object, an id longer than maxID, a
// body field name that is not plain) is an error wrapping errMalformed.
func decodeFrame(b []byte) (frame, error) {
	var f frame
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return f, fmt.Errorf("%w: not a JSON object", errMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return frame{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if dec.More() {
		return frame{}, fmt.Errorf("%w: trailing data after the frame", errMalformed)
	}
	if len(f.ID) > maxID || !utf8.ValidString(f.ID) {
		return frame{}, fmt.Errorf("%w: id longer than %d bytes or not UTF-8", errMalformed, maxID)
	}
	switch f.Type {
	case "req":
		if f.Call == "" || f.ID == "" {
			return frame{}, fmt.Errorf("%w: a request needs an id and a call", errMalformed)
		}
		if t := bytes.TrimSpace(f.Args); len(t) > 0 && string(t) != "null" && t[0] != '{' {
			return frame{}, fmt.Errorf("%w: args must be a JSON object", errMalformed)
		}
		if f.Body != "" && !plainName(f.Body) {
			return frame{}, fmt.Errorf("%w: body must name an args field", errMalformed)
		}
	case abi.CancelType:
		if a := bytes.TrimSpace(f.Args); f.ID == "" || f.Call != "" || (len(a) > 0 && string(a) != "null") || f.Body != "" {
			return frame{}, fmt.Errorf("%w: a cancel frame is {\"type\":\"cancel\",\"id\":ID}", errMalformed)
		}
	default:
		return frame{}, fmt.Errorf("%w: unknown frame type %q", errMalformed, f.Type)
	}
	return f, nil
}

// plainName reports whether s is a field name of 1-64 ASCII letters,
// digits or underscores.
func plainName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// withBody returns args with the field name set to body as a JSON
// string: the request's args once its binary body frame has arrived. The
// body must be UTF-8 (a file's text); args must not have the field.
func withBody(args json.RawMessage, name string, body []byte) (json.RawMessage, error) {
	if !utf8.Valid(body) {
		return nil, abi.E(abi.Invalid, "the body is not UTF-8 text")
	}
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(args)) > 0 && string(bytes.TrimSpace(args)) != "null" {
		if err := json.Unmarshal(args, &m); err != nil {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("bad args: %v", err))
		}
	}
	if m == nil {
		m = make(map[string]json.RawMessage, 1)
	}
	if _, ok := m[name]; ok {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("args have %q and a body fills it", name))
	}
	v, err := json.Marshal(string(body))
	if err != nil {
		return nil, abi.E(err)
	}
	m[name] = v
	return json.Marshal(m)
}

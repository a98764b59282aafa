package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestFrameCodec: the frames the encoders make decode back to what was
// encoded, FrameTag reads their type and id without decoding them, and
// the frames that must fail do.
func TestFrameCodec(t *testing.T) {
	type args struct {
		Path   string `json:"path"`
		Target string `json:"target,omitempty"`
	}
	for _, c := range []struct {
		name     string
		id, call string
		args     any
		want     string // the frame, without its newline; "" for an error
	}{
		{"typed", "7", "fs.read", &args{Path: "a/b"}, `{"type":"req","id":"7","call":"fs.read","args":{"path":"a/b"}}`},
		{"raw", "x", "sys.whoami", json.RawMessage(` {} `), `{"type":"req","id":"x","call":"sys.whoami","args":{}}`},
		{"none", "", "sys.whoami", nil, `{"type":"req","id":"","call":"sys.whoami"}`},
		{"null", "1", "sys.whoami", json.RawMessage(`null`), `{"type":"req","id":"1","call":"sys.whoami"}`},
		{"escaped id", "a\"b\n<", "x", nil, `{"type":"req","id":"a\"b\n\u003c","call":"x"}`},
		{"not an object", "1", "x", []int{1}, ""},
		{"bad raw", "1", "x", json.RawMessage(`{`), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := EncodeRequest(c.id, c.call, c.args)
			if c.want == "" {
				if err == nil || KindOf(err) != Invalid {
					t.Fatalf("EncodeRequest: %q %v, want a 400", b, err)
				}
				return
			}
			if err != nil || string(b) != c.want+"\n" {
				t.Fatalf("EncodeRequest: %q %v, want %q", b, err, c.want)
			}
			r, err := DecodeRequest(b)
			if err != nil || r.ID != c.id || r.Call != c.call {
				t.Fatalf("DecodeRequest(%q): %+v %v", b, r, err)
			}
			typ, id, err := FrameTag(b)
			if err != nil || typ != "req" || id != c.id {
				t.Fatalf("FrameTag(%q): %q %q %v", b, typ, id, err)
			}
		})
	}

	// Responses: a result, an error, a result that does not encode.
	type result struct {
		N int `json:"n"`
	}
	ok := EncodeResponse("3", "x.y", &result{N: 4}, nil)
	if string(ok) != `{"type":"res","id":"3","ok":true,"data":{"n":4}}`+"\n" {
		t.Fatalf("EncodeResponse: %q", ok)
	}
	var got result
	r, err := DecodeResponse(ok, &got)
	if err != nil || !r.OK || r.ID != "3" || got.N != 4 {
		t.Fatalf("DecodeResponse(%q): %+v %v", ok, r, err)
	}
	fail := EncodeResponse("4", "x.y", nil, E(Op("x.y"), NotExist, "gone"))
	r, err = DecodeResponse(fail, &got)
	if err != nil || r.OK || r.Error == nil || r.Error.Code != 404 || r.Error.Message != "x.y: gone" {
		t.Fatalf("DecodeResponse(%q): %+v %v", fail, r, err)
	}
	bad := EncodeResponse("5", "x.y", func() {}, nil)
	if r, err := DecodeResponse(bad, nil); err != nil || r.OK || r.Error.Code != 500 || !strings.HasPrefix(r.Error.Message, "x.y: encoding result") {
		t.Fatalf("a result that does not encode: %q", bad)
	}
	if typ, id, err := FrameTag(EncodeCancel("9")); err != nil || typ != CancelType || id != "9" {
		t.Fatalf("FrameTag(EncodeCancel): %q %q %v", typ, id, err)
	}
	// Frames of other encoders: FrameTag decodes them.
	for _, c := range []struct{ frame, typ, id string }{
		{`{ "id" : "2", "type": "res", "ok": true}`, "res", "2"},
		{`{"type":"res","id":"\u0032"}`, "res", "2"},
		{`{"ok":true}`, "", ""},
	} {
		if typ, id, err := FrameTag([]byte(c.frame)); err != nil || typ != c.typ || id != c.id {
			t.Errorf("FrameTag(%s): %q %q %v", c.frame, typ, id, err)
		}
	}
	for _, f := range []string{``, `[]`, `{"type":"res","id":2}`, `{"type":"req"`, `{"type":"sig","id":"1"}`} {
		_, err := DecodeResponse([]byte(f), nil)
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		if err == nil || !(errors.As(err, &se) || errors.As(err, &te) || strings.Contains(err.Error(), "not res")) {
			t.Errorf("DecodeResponse(%q): %v", f, err)
		}
	}
}

// FuzzFrames: the frame codec never panics; a request or response frame
// it encodes, whatever its id, call, args or error text, decodes back to
// what was encoded, with FrameTag finding its id; and on any bytes,
// FrameTag's id is the one the frame's full decoding finds whenever the
// frame names its id once.
func FuzzFrames(f *testing.F) {
	for _, s := range []struct{ frame, id, call, msg string }{
		{`{"type":"req","id":"1","call":"fs.read","args":{"path":"x"}}`, "1", "fs.read", "boom"},
		{`{"type":"res","id":"7","ok":true,"data":{"content":"a\nb"}}`, "7", "x", ""},
		{`{"type":"res","id":"7","ID":"8","ok":false,"error":{"code":404,"message":"x"}}`, "\"", "a\\b", "two\nlines"},
		{`{"type":"cancel","id":"3"}`, "", "", "\x00"},
		{`{"type":"res","id":"1","id":"2"}`, "é", "<>&", "\u2028"},
		{`{"type":"res","id":"1"` + "\xff", "\xff", "x", "\xff"},
		{`[1,2]`, "a", "b", "c"},
	} {
		f.Add([]byte(s.frame), s.id, s.call, s.msg)
	}
	f.Fuzz(func(t *testing.T, frame []byte, id, call, msg string) {
		// Any bytes.
		DecodeRequest(frame)
		var data map[string]any
		resp, rerr := DecodeResponse(frame, &data)
		typ, tag, terr := FrameTag(frame)
		if rerr == nil && terr == nil && typ != CancelType {
			var keys map[string]json.RawMessage
			if json.Unmarshal(frame, &keys) == nil {
				ids := 0
				for k := range keys {
					if strings.EqualFold(k, "id") {
						ids++
					}
				}
				// A key named twice exactly is folded by the map: count
				// its occurrences as a key in the text too.
				if ids == 1 && bytes.Count(frame, []byte(`"id"`))+bytes.Count(frame, []byte(`"ID"`)) <= 1 && tag != resp.ID {
					t.Fatalf("FrameTag(%q) = %q, the frame decodes to id %q", frame, tag, resp.ID)
				}
			}
		}

		// Frames we encode, whatever they carry.
		args := map[string]string{"path": msg}
		req, err := EncodeRequest(id, call, args)
		if err != nil {
			t.Fatalf("EncodeRequest(%q, %q): %v", id, call, err)
		}
		if bytes.Count(req, []byte("\n")) != 1 || req[len(req)-1] != '\n' {
			t.Fatalf("EncodeRequest: %q is not one line", req)
		}
		if _, tag, err := FrameTag(req); err != nil || tag != viaJSON(id) {
			t.Fatalf("FrameTag(%q) = %q %v, want %q", req, tag, err, id)
		}
		if call != "" {
			r, err := DecodeRequest(req)
			var back map[string]string
			if err != nil || r.Call != viaJSON(call) || json.Unmarshal(r.Args, &back) != nil || back["path"] != viaJSON(msg) {
				t.Fatalf("DecodeRequest(%q): %+v %v", req, r, err)
			}
		}
		for _, cause := range []error{nil, E(Op(call), Permission, msg)} {
			out := EncodeResponse(id, call, map[string]string{"m": msg}, cause)
			if bytes.Count(out, []byte("\n")) != 1 {
				t.Fatalf("EncodeResponse: %q is not one line", out)
			}
			var d map[string]string
			r, err := DecodeResponse(out, &d)
			if err != nil || r.ID != viaJSON(id) || r.OK != (cause == nil) {
				t.Fatalf("DecodeResponse(%q): %+v %v", out, r, err)
			}
			if cause != nil && (r.Error == nil || r.Error.Code != 403 || r.Error.Message != viaJSON(cause.Error())) {
				t.Fatalf("DecodeResponse(%q): error %+v", out, r.Error)
			}
			if cause == nil && d["m"] != viaJSON(msg) {
				t.Fatalf("DecodeResponse(%q): data %q", out, d)
			}
			if _, tag, err := FrameTag(out); err != nil || tag != r.ID {
				t.Fatalf("FrameTag(%q) = %q %v, want %q", out, tag, err, r.ID)
			}
		}
	})
}

// viaJSON is s as a JSON string decodes: each byte of invalid UTF-8 a
// U+FFFD.
func viaJSON(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}

package web

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestDecodeFrame: each frame form is accepted or refused as malformed.
func TestDecodeFrame(t *testing.T) {
	cases := []struct {
		in string
		ok bool
	}{
		{`{"type":"req","id":"1","call":"sys.whoami"}`, true},
		{`{"type":"req","id":"1","call":"fs.write","args":{"path":"/x"},"body":"content"}`, true},
		{`{"type":"cancel","id":"1"}`, true},
		{``, false},
		{`[]`, false},
		{`hello`, false},
		{`{"type":"req","id":"1"}`, false},
		{`{"type":"req","call":"x"}`, false},
		{`{"type":"res","id":"1","call":"x"}`, false},
		{`{"type":"req","id":"1","call":"x","args":[]}`, false},
		{`{"type":"req","id":"1","call":"x","extra":1}`, false},
		{`{"type":"req","id":"1","call":"x"} {}`, false},
		{`{"type":"req","id":"1","call":"x","body":"a b"}`, false},
		{`{"type":"cancel","id":"1","call":"x"}`, false},
	}
	for _, c := range cases {
		_, err := decodeFrame([]byte(c.in))
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, errMalformed)) {
			t.Errorf("decodeFrame(%q) = %v, want ok %v", c.in, err, c.ok)
		}
	}
}

// FuzzDecodeFrame: no input panics the frame decoder; an accepted frame
// is a req with an id and a call or a cancel with an id, and encodes
// again to a frame that decodes the same.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"req","id":"1","call":"sys.connect","args":{"protocol":2}}`,
		`{"type":"req","id":"2","call":"fs.write","args":{"path":"/x"},"body":"content"}`,
		`{"type":"cancel","id":"1"}`,
		`{"type":"req","id":"\u00e9","call":"x","args":null}`,
		`{"type":"sig"}`, `not json`, `{}`, `{"type":"req","id":"1","call":"x"}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeFrame(b)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v is not errMalformed", err)
			}
			return
		}
		if fr.ID == "" || (fr.Type == "req") == (fr.Call == "") {
			t.Fatalf("accepted %q as %+v", b, fr)
		}
		again, err := json.Marshal(fr)
		if err != nil {
			t.Fatal(err)
		}
		fr2, err := decodeFrame(again)
		if err != nil || fr2.ID != fr.ID || fr2.Call != fr.Call || fr2.Body != fr.Body {
			t.Fatalf("re-encoded %s: %+v, %v", again, fr2, err)
		}
	})
}

package abi

import (
	"encoding/json"
	"testing"
)

// refHasFiles is how FSReadResult.UnmarshalJSON told a listing before it
// read the keys in place: the object decoded again, into a map.
func refHasFiles(b []byte) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(b, &keys) != nil {
		return false
	}
	_, ok := keys["files"]
	return ok
}

// fsReadSeeds are answers of fs.read, and objects whose keys are hard to
// find.
var fsReadSeeds = []string{
	`{"content":"     1\ta small file\n","lines":1,"ok":true,"path":"/d/small.txt","size":13}`,
	`{"directories":[],"files":[],"ok":true,"path":"/d"}`,
	`{"directories":["b"],"files":["a"],"ok":true,"path":"/d"}`,
	`{"error":"no such file","ok":false}`,
	`{"ok":true,"content":"\"files\": [1]","path":"/x"}`,
	`{"ok":true,"nested":{"files":["a"]},"list":[{"files":1},"files"]}`,
	`{"f\u0069les":["a"],"ok":true}`,
	`{"FILES":["a"],"ok":true}`,
	`{"files":null,"ok":true}`,
	` { "ok" : true , "files" : [ "a" ] } `,
	`{"a\\":"\\","files":[]}`,
	`{"a":-1.5e3,"b":true,"c":null,"files":["x"]}`,
	`{}`, `null`, `[]`, `"files"`, `{"files":1}`,
	`{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"ok":true,"path":"/c.png","size":8}`,
	`{"content":[{"type":"image"},{"type":"image"}],"ok":true}`,
	`{"content":[{"type":"text","text":"x"}],"ok":true}`,
	`{"content":[{"type":"image"}],"files":[],"ok":true}`,
	`{"content":[],"ok":true}`,
}

// TestFSReadResultDir: a listing is an object with the key "files" at its
// top level, however it is spelled with escapes and wherever else the
// word appears; the keys are read in place as a second decoding into a
// map read them.
func TestFSReadResultDir(t *testing.T) {
	for _, s := range fsReadSeeds {
		var r FSReadResult
		err := json.Unmarshal([]byte(s), &r)
		if err != nil {
			continue
		}
		if want := refHasFiles([]byte(s)); r.Dir != want {
			t.Errorf("%s: Dir %v, want %v", s, r.Dir, want)
		}
	}
	var r FSReadResult
	if err := json.Unmarshal([]byte(`{"f\u0069les":[],"ok":true,"path":"/d"}`), &r); err != nil || !r.Dir {
		t.Errorf("an escaped files key: Dir %v (%v), want a listing", r.Dir, err)
	}
	if err := json.Unmarshal([]byte(`{"ok":true,"content":"\"files\":[]","path":"/f"}`), &r); err != nil || r.Dir {
		t.Errorf("files in a string: Dir %v (%v), want a file", r.Dir, err)
	}
}

// FuzzFSReadResult: whatever the bytes, decoding an fs.read result never
// panics and tells a listing exactly as a decoding into a map does.
func FuzzFSReadResult(f *testing.F) {
	for _, s := range fsReadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r FSReadResult
		if err := r.UnmarshalJSON(b); err != nil {
			return
		}
		if want := refHasFiles(b); r.Dir != want {
			t.Fatalf("%q: Dir %v, want %v", b, r.Dir, want)
		}
	})
}

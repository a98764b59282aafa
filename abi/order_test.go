package abi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"testing"
)

// fill sets every field of the struct v points to a non-zero value, so no
// omitempty field is left out.
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Uint32, reflect.Uint64, reflect.Uint:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Pointer:
		if depth > 3 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		if v.Type() == reflect.TypeOf(json.RawMessage(nil)) {
			v.SetBytes([]byte(`{}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	}
}

// topKeys returns the keys of the JSON object b in the order written.
func topKeys(t *testing.T, b []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object", b)
	}
	var keys []string
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// The proc results that were maps (whose keys encoding/json sorts) keep
// their keys in sorted order, so frames, ctl read-backs and tool results
// are byte for byte what they were; set or zero.
func TestProcResultKeysSorted(t *testing.T) {
	for _, v := range []any{
		&SpawnResult{}, &SendResult{}, &ConversationGetResult{}, &StatusResult{}, &ProcStatusRecord{},
		&AbortResult{}, &HilResult{}, &ResetResult{}, &HistoryResult{}, &ConvOpenResult{},
		&ConvListResult{}, &ConvCloseResult{}, &ConvResetResult{}, &PolicyResult{}, &CompactResult{},
		&ForkResult{}, &SegmentsResult{}, &SegmentReadResult{}, &CheckpointResult{},
	} {
		for _, filled := range []bool{false, true} {
			rv := reflect.New(reflect.TypeOf(v).Elem())
			if filled {
				fill(rv.Elem(), 0)
			}
			b, err := json.Marshal(rv.Interface())
			if err != nil {
				t.Fatal(err)
			}
			if keys := topKeys(t, b); !sort.StringsAreSorted(keys) {
				t.Errorf("%T (filled %v): keys %v are not sorted", v, filled, keys)
			}
		}
	}
	// A page by offset has pendingHil, null when none waits.
	n := int64(0)
	b, _ := json.Marshal(&HistoryResult{MessageCount: &n})
	if !bytes.Contains(b, []byte(`"pendingHil":null`)) {
		t.Errorf("history by offset: %s", b)
	}
	b, _ = json.Marshal(&HistoryResult{})
	if bytes.Contains(b, []byte(`pendingHil`)) {
		t.Errorf("history by id: %s", b)
	}
}

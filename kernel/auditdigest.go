package kernel

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The args digest without JSON (docs/operations.md, "What it costs").
//
// digestArgs gives, for every args value, exactly the text digestJSON
// gives (the digest of the args' JSON: see digestJSON), but for a struct
// it walks the fields with a plan made once per type instead of
// marshalling the args and parsing them back: strings, integers, booleans
// and slices are written directly; a field of any other type (a map, a
// nested struct, a pointer, json.RawMessage) is marshalled alone and
// summarised as digestJSON would. A type the plan cannot follow exactly
// (a json.Marshaler, embedded fields, the ",string" and "omitzero"
// options) goes through digestJSON whole. TestDigestArgsSame and
// FuzzDigestArgs hold the two to the same text.

// digestPlan is how digestArgs walks one args type (a struct or a
// pointer to one): its JSON fields,
// sorted by name. slow: the type goes through digestJSON.
type digestPlan struct {
	slow   bool
	ptr    bool // the args are a pointer to the struct
	fields []digestField
}

// digestField is one JSON field of a struct type.
type digestField struct {
	name      string
	quoted    string // name as a JSON string
	index     int
	omitEmpty bool
	hidden    bool // a secret or a content: its size only
	role      byte // 'p' pid, 'c' conversation, 't' target, 0 none
	kind      byte // 's' string, 'i' int, 'u' uint, 'b' bool, 'l' slice or array, 0 marshalled alone
}

// digestPlans caches a plan per args type (reflect.Type -> *digestPlan).
// Args types are the program's: the cache is bounded by them.
var digestPlans sync.Map

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func planOf(t reflect.Type) *digestPlan {
	if p, ok := digestPlans.Load(t); ok {
		return p.(*digestPlan)
	}
	p := makePlan(t)
	digestPlans.Store(t, p)
	return p
}

func makePlan(t reflect.Type) *digestPlan {
	slow := &digestPlan{slow: true}
	p := &digestPlan{}
	if t.Kind() == reflect.Pointer {
		if t.Implements(marshalerType) || t.Implements(textMarshalerType) {
			return slow
		}
		p.ptr, t = true, t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return slow
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType) {
		return slow
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous {
			return slow
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		f := digestField{name: name, index: i}
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "omitempty":
				f.omitEmpty = true
			case "string", "omitzero":
				return slow
			}
		}
		if !plainString(name) {
			return slow
		}
		f.quoted = `"` + name + `"`
		f.hidden = hiddenKey(name)
		switch strings.ToLower(name) {
		case "pid":
			f.role = 'p'
		case "conversation", "conversationid", "cid", "conv":
			f.role = 'c'
		case "target":
			f.role = 't'
		}
		ft := sf.Type
		special := ft.Implements(marshalerType) || reflect.PointerTo(ft).Implements(marshalerType) ||
			ft.Implements(textMarshalerType) || reflect.PointerTo(ft).Implements(textMarshalerType)
		if !special {
			switch ft.Kind() {
			case reflect.String:
				f.kind = 's'
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				f.kind = 'i'
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
				f.kind = 'u'
			case reflect.Bool:
				f.kind = 'b'
			case reflect.Slice, reflect.Array:
				if ft.Elem().Kind() != reflect.Uint8 { // []byte is a base64 string
					f.kind = 'l'
				}
			}
		}
		if f.role != 0 && f.kind != 's' {
			f.kind = 0 // read back from its JSON, as digestJSON does
		}
		p.fields = append(p.fields, f)
	}
	slices.SortFunc(p.fields, func(a, b digestField) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(p.fields); i++ {
		if p.fields[i].name == p.fields[i-1].name {
			return slow // Go's rules for duplicate names: leave them to JSON
		}
	}
	return p
}

// plainString reports whether s is written in JSON as itself between
// quotes: printable ASCII, none of " \ < > & (json.Marshal escapes
// those).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// digestArgs summarises a call's args for its audit record (see
// digestJSON, whose text it gives).
func digestArgs(args any) argDigest {
	if args == nil {
		return argDigest{}
	}
	v := reflect.ValueOf(args)
	p := planOf(v.Type())
	if p.slow || (p.ptr && v.IsNil()) {
		return digestJSON(args)
	}
	if p.ptr {
		v = v.Elem()
	}
	var d argDigest
	var arr [256]byte
	b := append(arr[:0], '{')
	n := 0
	for i := range p.fields {
		f := &p.fields[i]
		fv := v.Field(f.index)
		if f.omitEmpty && emptyValue(fv) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, f.quoted...)
		b = append(b, ':')
		var ok bool
		if b, ok = f.appendValue(b, fv, &d); !ok {
			return digestJSON(args)
		}
		if len(b) > digestMax {
			b = append(b[:digestMax], `…"}`...)
			d.text = string(b)
			return d
		}
	}
	b = append(b, '}')
	d.text = string(b)
	return d
}

// appendValue appends the digest of the field's value fv to b (ok false:
// the value does not marshal; the whole args go through digestJSON, as
// their marshal fails there too).
func (f *digestField) appendValue(b []byte, fv reflect.Value, d *argDigest) ([]byte, bool) {
	switch f.kind {
	case 's':
		s := fv.String()
		if !plainString(s) {
			raw, _ := json.Marshal(s)
			if f.role != 0 {
				setRole(d, f.role, raw)
			}
			return append(b, summariseAs(f.hidden, raw, 0)...), true
		}
		switch f.role {
		case 'p':
			d.pid = s
		case 'c':
			d.conv = s
		case 't':
			d.target = s
		}
		if f.hidden {
			b = append(b, `"<`...)
			b = strconv.AppendInt(b, int64(len(s)), 10)
			return append(b, ` bytes>"`...), true
		}
		b = append(b, '"')
		if len(s) > digestStr {
			b = append(b, s[:digestStr]...)
			b = append(b, "…"...)
		} else {
			b = append(b, s...)
		}
		return append(b, '"'), true
	case 'i', 'u', 'b':
		if f.hidden {
			return append(b, `"<hidden>"`...), true
		}
		switch f.kind {
		case 'i':
			return strconv.AppendInt(b, fv.Int(), 10), true
		case 'u':
			return strconv.AppendUint(b, fv.Uint(), 10), true
		}
		return strconv.AppendBool(b, fv.Bool()), true
	case 'l':
		if fv.Kind() == reflect.Slice && fv.IsNil() {
			return append(b, "null"...), true
		}
		b = append(b, `"<`...)
		b = strconv.AppendInt(b, int64(fv.Len()), 10)
		return append(b, ` items>"`...), true
	}
	raw, err := json.Marshal(fv.Interface())
	if err != nil {
		return b, false
	}
	if f.role != 0 {
		setRole(d, f.role, raw)
	}
	return append(b, summariseAs(f.hidden, raw, 0)...), true
}

func setRole(d *argDigest, role byte, raw []byte) {
	switch role {
	case 'p':
		json.Unmarshal(raw, &d.pid)
	case 'c':
		json.Unmarshal(raw, &d.conv)
	case 't':
		json.Unmarshal(raw, &d.target)
	}
}

// emptyValue is encoding/json's omitempty test.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

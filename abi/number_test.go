package abi

import (
	"math"
	"testing"
)

func TestParseFinite(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0", 0, true}, {"1.5", 1.5, true}, {"-2", -2, true}, {"+3e2", 300, true}, {".5", 0.5, true},
		{"NaN", 0, false}, {"nan", 0, false}, {"-NaN", 0, false}, {"Inf", 0, false}, {"+Inf", 0, false},
		{"-inf", 0, false}, {"Infinity", 0, false}, {"1e400", 0, false}, {"-1e400", 0, false},
		{"0x1p3", 0, false}, {"", 0, false}, {"abc", 0, false}, {"1_0", 0, false}, {"+-1", 0, false},
	} {
		got, err := ParseFinite("usd", tc.in)
		if tc.ok != (err == nil) || (err != nil && KindOf(err) != Invalid) || (tc.ok && got != tc.want) {
			t.Errorf("ParseFinite(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if err := Finite("temp", f); err == nil || KindOf(err) != Invalid {
			t.Errorf("Finite(%v) = %v, want a 400", f, err)
		}
	}
	if err := Finite("temp", 1.5); err != nil {
		t.Errorf("Finite(1.5) = %v", err)
	}
}

// FuzzParseFinite: whatever the text, ParseFinite returns a finite number
// or a 400.
func FuzzParseFinite(f *testing.F) {
	for _, s := range []string{"1", "NaN", "-Inf", "1e308", "1e309", "0x1p-2", "infinity", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseFinite("x", s)
		if err != nil {
			if KindOf(err) != Invalid {
				t.Fatalf("ParseFinite(%q): %v, want a 400", s, err)
			}
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("ParseFinite(%q) = %v", s, v)
		}
	})
}

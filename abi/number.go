package abi

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Finite returns a 400 naming field when f is NaN or ±Inf, else nil. Every
// float a syscall takes is checked with it before anything changes: JSON
// cannot carry NaN or Inf, but a ctl line, a CLI flag or an in-process
// caller can, and a comparison with NaN is always false, so a range check
// alone lets it through (and JSON cannot store it afterwards).
func Finite(field string, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return E(Invalid, fmt.Sprintf("%s: want a finite number, not %v", field, f))
	}
	return nil
}

// ParseFinite parses s as a decimal number that is finite: NaN, Inf,
// Infinity (any case, any sign), hexadecimal floats and numbers out of
// float64's range are a 400 naming field, as are words that are no
// number. Every float a ctl line or a CLI flag carries is parsed with it.
func ParseFinite(field, s string) (float64, error) {
	t := strings.TrimLeft(s, "+-")
	if t == "" || strings.ContainsAny(t, "xXpP_") || !(t[0] >= '0' && t[0] <= '9' || t[0] == '.') {
		return 0, E(Invalid, fmt.Sprintf("%s=%q: want a finite decimal number", field, s))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, E(Invalid, fmt.Sprintf("%s=%q: want a finite decimal number", field, s))
	}
	if err := Finite(field, f); err != nil {
		return 0, err
	}
	return f, nil
}

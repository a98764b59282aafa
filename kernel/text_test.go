package kernel

import (
	"errors"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"researcher", true},
		{"näive ✓ label", true},
		{"", true},
		{strings.Repeat("a", MaxLabel), true},
		{strings.Repeat("a", MaxLabel+1), false},
		{"x\nuid: 0", false},
		{"x\x00y", false},
		{"\x1b[2J", false},
		{"tab\there", false},
		{"\x7f", false},
		{"\u0085", false},
		{"a\u2028b", false},
		{"\xff", false},
	} {
		err := CheckText("label", tc.s, MaxLabel)
		if (err == nil) != tc.ok {
			t.Errorf("CheckText(%q) = %v, want ok=%v", tc.s, err, tc.ok)
		}
		var ke *abi.Error
		if err != nil && (!errors.As(err, &ke) || ke.Kind != abi.Invalid || !strings.Contains(err.Error(), "label")) {
			t.Errorf("CheckText(%q) = %v, want an Invalid error naming the field", tc.s, err)
		}
	}
}

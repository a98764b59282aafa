package abi

import (
	"testing"
	"time"
)

func TestFormatMs(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want string
	}{
		{3600000, "1h"},
		{5400000, "1h30m"},
		{60000, "1m"},
		{90000, "1m30s"},
		{1000, "1s"},
		{1500, "1.5s"},
		{1, "1ms"},
		{3600000 + 5000, "1h0m5s"},
		{86400000, "24h"},
		{0, "0s"},
	} {
		if got := FormatMs(tc.ms); got != tc.want {
			t.Errorf("FormatMs(%d) = %q, want %q", tc.ms, got, tc.want)
		}
		d, err := time.ParseDuration(FormatMs(tc.ms))
		if err != nil || d.Milliseconds() != tc.ms {
			t.Errorf("FormatMs(%d) does not parse back: %v %v", tc.ms, d, err)
		}
	}
}

package abi

import (
	"strings"
	"time"
)

// FormatMs renders a duration of ms milliseconds (the *Ms fields of the
// abi types) as time.Duration.String does, without the zero minutes and
// seconds of whole hours and minutes: "1h", "1h30m", "1m30s", "1.5s",
// "1ms", but "1h0m5s". time.ParseDuration reads every result back.
func FormatMs(ms int64) string {
	s := (time.Duration(ms) * time.Millisecond).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

package sched

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the DST tests must not depend on the host's zoneinfo
)

func cronLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func cronTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad time %q: %v", s, err)
	}
	return v
}

func cronMustParse(t testing.TB, expr, tz string) *Cron {
	t.Helper()
	c, err := ParseCron(expr, tz)
	if err != nil {
		t.Fatalf("ParseCron(%q, %q): %v", expr, tz, err)
	}
	return c
}

// TestCronNext checks chains of Next calls: want[0] = Next(after),
// want[i] = Next(want[i-1]). Times carry their UTC offset, which tells summer
// from winter time, and each result must be reported in the cron's zone.
func TestCronNext(t *testing.T) {
	tests := []struct {
		name, expr, tz, after string
		want                  []string
	}{
		// Ordinary expressions (2026-01-01 is a Thursday).
		{"every 15 min", "*/15 * * * *", "", "2026-01-01T00:07:30Z",
			[]string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:00:00Z"}},
		{"sub-second after", "*/15 * * * *", "", "2026-01-01T00:14:59.999Z",
			[]string{"2026-01-01T00:15:00Z"}},
		{"after is a fire time", "*/15 * * * *", "", "2026-01-01T00:15:00Z",
			[]string{"2026-01-01T00:30:00Z"}},
		{"just after a fire time", "*/15 * * * *", "", "2026-01-01T00:15:00.000000001Z",
			[]string{"2026-01-01T00:30:00Z"}},
		{"weekdays at 9", "0 9 * * 1-5", "", "2026-01-02T10:00:00Z",
			[]string{"2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z", "2026-01-07T09:00:00Z", "2026-01-08T09:00:00Z", "2026-01-09T09:00:00Z", "2026-01-12T09:00:00Z"}},
		{"weekdays by name", "0 9 * * mon-FRI", "", "2026-01-09T09:00:00Z",
			[]string{"2026-01-12T09:00:00Z"}},
		{"@daily", "@daily", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
		{"@midnight", "@midnight", "", "2026-01-01T12:00:00Z",
			[]string{"2026-01-02T00:00:00Z"}},
		{"@hourly", "@hourly", "", "2026-01-01T00:59:59Z",
			[]string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}},
		{"@weekly", "@weekly", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"@monthly", "@monthly", "", "2026-01-31T23:59:00Z",
			[]string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"}},
		{"@yearly", "@yearly", "", "2026-01-01T00:00:00Z",
			[]string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"@annually", "@ANNUALLY", "", "2026-06-01T00:00:00Z",
			[]string{"2027-01-01T00:00:00Z"}},
		{"ranges steps lists", "5-10/2,30 1 * * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T01:05:00Z", "2026-01-01T01:07:00Z", "2026-01-01T01:09:00Z", "2026-01-01T01:30:00Z", "2026-01-02T01:05:00Z"}},
		{"value with step", "50/5 23 * * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T23:50:00Z", "2026-01-01T23:55:00Z", "2026-01-02T23:50:00Z"}},
		{"hour step", "0 */6 * * *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T06:00:00Z", "2026-01-01T12:00:00Z", "2026-01-01T18:00:00Z", "2026-01-02T00:00:00Z"}},
		{"month and weekday names", "0 0 * JAN,jul Sun", "", "2026-01-20T00:00:00Z",
			[]string{"2026-01-25T00:00:00Z", "2026-07-05T00:00:00Z", "2026-07-12T00:00:00Z"}},
		{"month range by name", "0 0 1 nov-dec *", "", "2026-01-01T00:00:00Z",
			[]string{"2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", "2027-11-01T00:00:00Z"}},
		{"7 is Sunday", "0 0 * * 7", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"5-7 is Fri-Sun", "0 0 * * 5-7", "", "2026-01-01T00:00:00Z",
			[]string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z"}},
		{"dom or dow", "0 0 1 * MON", "", "2026-01-26T00:00:00Z",
			[]string{"2026-02-01T00:00:00Z", "2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"}},
		{"dom or dow, Friday 13th", "0 0 13 * 5", "", "2026-02-06T00:00:00Z",
			[]string{"2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z", "2026-03-13T00:00:00Z", "2026-03-20T00:00:00Z"}},
		{"dom star step and dow", "0 0 */10 * MON", "", "2026-01-01T00:00:00Z",
			[]string{"2026-05-11T00:00:00Z", "2026-06-01T00:00:00Z"}},
		{"dom with star dow", "0 0 31 * *", "", "2026-01-31T00:00:00Z",
			[]string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"leap day", "0 0 29 2 *", "", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"zone without DST", "30 9 * * *", "Asia/Kolkata", "2026-01-01T03:59:00Z",
			[]string{"2026-01-01T09:30:00+05:30", "2026-01-02T09:30:00+05:30"}},
		{"result in the cron's zone", "0 9 * * *", "Europe/Amsterdam", "2026-01-01T23:00:00-05:00",
			[]string{"2026-01-02T09:00:00+01:00"}},

		// Europe/Amsterdam: 2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET.
		{"AMS gap runs at gap end once", "30 2 * * *", "Europe/Amsterdam", "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"AMS gap end is after gap time", "30 2 * * *", "Europe/Amsterdam", "2026-03-29T01:59:59+01:00",
			[]string{"2026-03-29T03:00:00+02:00"}},
		{"AMS gap and gap end coincide", "0,30 2,3 * * *", "Europe/Amsterdam", "2026-03-29T01:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00", "2026-03-30T02:00:00+02:00"}},
		{"AMS hourly skips missing hour", "0 * * * *", "Europe/Amsterdam", "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"AMS every 15 across gap", "*/15 * * * *", "Europe/Amsterdam", "2026-03-29T01:40:00+01:00",
			[]string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
		{"AMS overlap runs at first occurrence", "30 2 * * *", "Europe/Amsterdam", "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"AMS overlap second pass does not rerun", "30 2 * * *", "Europe/Amsterdam", "2026-10-25T02:10:00+01:00",
			[]string{"2026-10-26T02:30:00+01:00"}},
		{"AMS every 15 across overlap", "*/15 * * * *", "Europe/Amsterdam", "2026-10-25T01:50:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:15:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:45:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T03:15:00+01:00"}},
		{"AMS every 15 from inside second pass", "*/15 * * * *", "Europe/Amsterdam", "2026-10-25T02:20:00+01:00",
			[]string{"2026-10-25T03:00:00+01:00"}},
		{"AMS hourly across overlap", "0 * * * *", "Europe/Amsterdam", "2026-10-25T00:30:00+02:00",
			[]string{"2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T04:00:00+01:00"}},

		// America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
		{"NYC gap runs at gap end once", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"NYC hourly skips missing hour", "0 * * * *", "America/New_York", "2026-03-08T00:30:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
		{"NYC overlap runs at first occurrence", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"NYC 02:30 on fall-back day is unique", "30 2 * * *", "America/New_York", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T02:30:00-05:00"}},
		{"NYC every 15 across overlap", "*/15 * * * *", "America/New_York", "2026-11-01T00:50:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:15:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:45:00-04:00", "2026-11-01T02:00:00-05:00"}},

		// Australia/Sydney: 2026-04-05 03:00 AEDT -> 02:00 AEST; 2026-10-04 02:00 AEST -> 03:00 AEDT.
		{"SYD gap runs at gap end once", "30 2 * * *", "Australia/Sydney", "2026-10-03T12:00:00+10:00",
			[]string{"2026-10-04T03:00:00+11:00", "2026-10-05T02:30:00+11:00"}},
		{"SYD hourly skips missing hour", "0 * * * *", "Australia/Sydney", "2026-10-04T00:30:00+10:00",
			[]string{"2026-10-04T01:00:00+10:00", "2026-10-04T03:00:00+11:00", "2026-10-04T04:00:00+11:00"}},
		{"SYD overlap runs at first occurrence", "30 2 * * *", "Australia/Sydney", "2026-04-04T12:00:00+11:00",
			[]string{"2026-04-05T02:30:00+11:00", "2026-04-06T02:30:00+10:00"}},
		{"SYD every 15 across overlap", "*/15 * * * *", "Australia/Sydney", "2026-04-05T01:50:00+11:00",
			[]string{"2026-04-05T02:00:00+11:00", "2026-04-05T02:15:00+11:00", "2026-04-05T02:30:00+11:00", "2026-04-05T02:45:00+11:00", "2026-04-05T03:00:00+10:00"}},

		// Australia/Lord_Howe shifts by 30 minutes: 2026-10-04 02:00 -> 02:30;
		// 2026-04-05 02:00 -> 01:30.
		{"LHI half-hour gap", "*/15 * * * *", "Australia/Lord_Howe", "2026-10-04T01:50:00+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-04T02:45:00+11:00"}},
		{"LHI half-hour overlap", "*/15 * * * *", "Australia/Lord_Howe", "2026-04-05T01:20:00+11:00",
			[]string{"2026-04-05T01:30:00+11:00", "2026-04-05T01:45:00+11:00", "2026-04-05T02:00:00+10:30"}},

		// Pacific/Apia skipped 2011-12-30 entirely (-10:00 -> +14:00).
		{"whole missing day", "0 12 * * *", "Pacific/Apia", "2011-12-29T12:00:00-10:00",
			[]string{"2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"}},

		// America/Sao_Paulo used to change at midnight: 2018-11-04 00:00 -> 01:00
		// and 2018-02-18 00:00 -> 2018-02-17 23:00.
		{"midnight gap", "0 0 * * *", "America/Sao_Paulo", "2018-11-03T12:00:00-03:00",
			[]string{"2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"}},
		{"overlap before midnight", "30 23 * * *", "America/Sao_Paulo", "2018-02-17T12:00:00-02:00",
			[]string{"2018-02-17T23:30:00-02:00", "2018-02-18T23:30:00-03:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cronMustParse(t, tt.expr, tt.tz)
			after := cronTime(t, tt.after)
			for i, w := range tt.want {
				got, ok := c.Next(after)
				if !ok {
					t.Fatalf("step %d: Next(%s) = none, want %s", i, after.Format(time.RFC3339Nano), w)
				}
				if !got.After(after) {
					t.Fatalf("step %d: Next(%s) = %s, not strictly later", i, after.Format(time.RFC3339Nano), got.Format(time.RFC3339))
				}
				if s := got.Format(time.RFC3339); s != w {
					t.Fatalf("step %d: Next(%s) = %s, want %s", i, after.Format(time.RFC3339Nano), s, w)
				}
				if got.Location() != c.Location() {
					t.Errorf("step %d: result in %v, want %v", i, got.Location(), c.Location())
				}
				after = got
			}
		})
	}
}

func TestCronNextNone(t *testing.T) {
	tests := []struct{ expr, tz, after string }{
		{"0 0 30 2 *", "", "2026-01-01T00:00:00Z"},
		{"0 0 31 4,6,9,11 *", "Europe/Amsterdam", "2026-01-01T00:00:00Z"},
		{"* * 30,31 feb *", "America/New_York", "2026-01-01T00:00:00Z"},
		// The next 29 February after 2096 is in 2104, beyond the five-year horizon.
		{"0 0 29 2 *", "", "2096-03-01T00:00:00Z"},
	}
	for _, tt := range tests {
		c := cronMustParse(t, tt.expr, tt.tz)
		if got, ok := c.Next(cronTime(t, tt.after)); ok || !got.IsZero() {
			t.Errorf("%q: Next = %v, %v; want zero, false", tt.expr, got, ok)
		}
	}
}

func TestParseCronErrors(t *testing.T) {
	tests := []struct {
		expr, tz string
		want     string // a substring of the error
	}{
		{"", "", "empty"},
		{"   ", "", "empty"},
		{"* * * *", "", "has 4 fields"},
		{"* * * * * *", "", "has 6 fields: only the 5-field form"},
		{"0 * * * * * 2026", "", "has 7 fields: only the 5-field form"},
		{"* * * * * * * *", "", "has 8 fields"},
		{"@every 5m", "", "@every is not supported"},
		{"@reboot", "", "@reboot is not supported"},
		{"@fortnightly", "", "unknown macro"},
		{"@daily 0", "", "unexpected \"0\" after @daily"},
		{"60 * * * *", "", "minute field \"60\": value 60 out of range 0-59"},
		{"* 24 * * *", "", "hour field \"24\": value 24 out of range 0-23"},
		{"* * 0 * *", "", "day-of-month field \"0\": value 0 out of range 1-31"},
		{"* * 32 * *", "", "day-of-month field"},
		{"* * * 13 *", "", "month field \"13\""},
		{"* * * 0 *", "", "month field \"0\""},
		{"* * * * 8", "", "day-of-week field \"8\""},
		{"*/0 * * * *", "", "minute field \"*/0\": step \"0\""},
		{"*/61 * * * *", "", "step \"61\" must be a number from 1 to 60"},
		{"*/ * * * *", "", "step \"\""},
		{"1/x * * * *", "", "step \"x\""},
		{"5-1 * * * *", "", "range \"5-1\" runs backwards"},
		{"* * * * FRI-MON", "", "runs backwards"},
		{"a * * * *", "", "minute field \"a\": invalid value \"a\""},
		{"MON * * * *", "", "minute field \"MON\": invalid value"},
		{"* * * FOO *", "", "month field \"FOO\": invalid value \"FOO\""},
		{"* * * * january", "", "day-of-week field \"january\""},
		{"* * * * MONDAY", "", "day-of-week field \"MONDAY\""},
		{"* * L * *", "", "day-of-month field \"L\""},
		{"* * 15W * *", "", "day-of-month field \"15W\""},
		{"* * ? * *", "", "day-of-month field \"?\""},
		{"* * * * MON#2", "", "day-of-week field \"MON#2\""},
		{"* * * * 5L", "", "day-of-week field \"5L\""},
		{"1,,2 * * * *", "", "empty list item"},
		{"1, * * * *", "", "empty list item"},
		{"-1 * * * *", "", "missing value"},
		{"1- * * * *", "", "missing value"},
		{"+1 * * * *", "", "invalid value \"+1\""},
		{"1-2-3 * * * *", "", "invalid value \"2-3\""},
		{"99999999999999999999 * * * *", "", "out of range"},
		{"0 0 * * *", "Mars/Olympus_Mons", "cron time zone \"Mars/Olympus_Mons\""},
		{"0 0 * * *", "Local", "cron time zone \"Local\""},
		{"0 0 * * *", "../../etc/passwd", "cron time zone"},
		{"0 0 * * *", "europe/amsterdam ", "cron time zone"},
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.expr, tt.tz)
		if err == nil {
			t.Errorf("ParseCron(%q, %q) = %v, want error containing %q", tt.expr, tt.tz, c, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseCron(%q, %q) error %q, want it to contain %q", tt.expr, tt.tz, err, tt.want)
		}
	}
}

func TestCronString(t *testing.T) {
	tests := []struct{ expr, tz, want string }{
		{"*/15  *\t* * *", "", "*/15 * * * *"},
		{" 0 9 * * MON-FRI ", "Europe/Amsterdam", "0 9 * * MON-FRI"},
		{"@daily", "America/New_York", "@daily"},
	}
	for _, tt := range tests {
		c := cronMustParse(t, tt.expr, tt.tz)
		if got := c.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
		wantLoc := tt.tz
		if wantLoc == "" {
			wantLoc = "UTC"
		}
		if got := c.Location().String(); got != wantLoc {
			t.Errorf("Location() = %q, want %q", got, wantLoc)
		}
	}
}

// cronOracle simulates c minute by minute over real time: at each whole
// minute u in (from-2 days, to], the wall-clock minutes that the clock
// newly reaches (normally just the current one, after a forward jump also
// the skipped ones, after a backward jump none) are checked against the
// expression, and u is a fire time if any matches. It returns the fire
// times in (from, to].
func cronOracle(c *Cron, from, to time.Time) []time.Time {
	loc := c.Location()
	var fires []time.Time
	u := from.Add(-48 * time.Hour).Truncate(time.Minute)
	maxWall := cronWall(u.Add(-time.Minute).In(loc))
	for ; !u.After(to); u = u.Add(time.Minute) {
		w := cronWall(u.In(loc))
		fire := false
		for x := maxWall + 60; x <= w; x += 60 {
			if cronMatchesWall(c, x) {
				fire = true
			}
		}
		if w > maxWall {
			maxWall = w
		}
		if fire && u.After(from) {
			fires = append(fires, u.In(loc))
		}
	}
	return fires
}

// cronWall returns t's wall clock in its location, as seconds read as UTC.
func cronWall(t time.Time) int64 {
	y, mo, d := t.Date()
	return time.Date(y, mo, d, t.Hour(), t.Minute(), 0, 0, time.UTC).Unix()
}

func cronMatchesWall(c *Cron, wall int64) bool {
	w := time.Unix(wall, 0).UTC()
	return c.minute&(1<<uint(w.Minute())) != 0 &&
		c.hour&(1<<uint(w.Hour())) != 0 &&
		c.month&(1<<uint(w.Month())) != 0 &&
		c.dayMatches(w.Day(), w.Weekday())
}

// TestCronNextOracle compares Next with cronOracle around DST changes.
func TestCronNextOracle(t *testing.T) {
	windows := []struct{ tz, day string }{
		{"Europe/Amsterdam", "2026-03-29"},
		{"Europe/Amsterdam", "2026-10-25"},
		{"America/New_York", "2026-03-08"},
		{"America/New_York", "2026-11-01"},
		{"Australia/Sydney", "2026-04-05"},
		{"Australia/Sydney", "2026-10-04"},
		{"Australia/Lord_Howe", "2026-04-05"},
		{"Australia/Lord_Howe", "2026-10-04"},
		{"Europe/London", "2026-03-29"},
		{"Europe/London", "2026-10-25"},
		{"America/Sao_Paulo", "2018-02-17"},
		{"America/Sao_Paulo", "2018-11-04"},
		{"Pacific/Apia", "2011-12-30"},
		{"Asia/Kolkata", "2026-03-29"},
		{"UTC", "2026-03-29"},
	}
	exprs := []string{
		"* * * * *", "*/15 * * * *", "0 * * * *", "30 * * * *", "30 2 * * *", "30 1 * * *",
		"0,30 2 * * *", "59 1 * * *", "0 3 * * *", "0 2 * * *", "*/7 1-3 * * *", "0 0 * * *",
		"30 23 * * *", "45 0-4 * * SUN", "0 12 * * *", "15 2 25 10 *", "*/20 2 * 3,4,10,11 0",
	}
	for _, w := range windows {
		loc := cronLoc(t, w.tz)
		day, err := time.ParseInLocation("2006-01-02", w.day, loc)
		if err != nil {
			t.Fatal(err)
		}
		from, to := day.Add(-30*time.Hour), day.Add(54*time.Hour)
		for _, e := range exprs {
			c := cronMustParse(t, e, w.tz)
			want := cronOracle(c, from, to)
			// The chain of Next calls yields exactly the oracle's fire times.
			var got []time.Time
			for at := from; ; {
				n, ok := c.Next(at)
				if !ok || n.After(to) {
					break
				}
				got = append(got, n)
				at = n
			}
			if d := cronFirstDiff(got, want); d >= 0 {
				t.Errorf("%s %s %q: %d fire times, want %d; first difference at #%d: got %v, want %v",
					w.tz, w.day, e, len(got), len(want), d, cronAt(got, d), cronAt(want, d))
				continue
			}
			// Next from arbitrary instants agrees with the oracle too.
			i := 0
			for at := from; at.Before(to); at = at.Add(7*time.Minute + 13*time.Second) {
				for i < len(want) && !want[i].After(at) {
					i++
				}
				if i == len(want) {
					break
				}
				if n, ok := c.Next(at); !ok || !n.Equal(want[i]) {
					t.Errorf("%s %q: Next(%s) = %v, %v; want %v", w.tz, e, at.Format(time.RFC3339), n, ok, want[i])
					break
				}
			}
		}
	}
}

func cronFirstDiff(a, b []time.Time) int {
	for i := 0; i < len(a) || i < len(b); i++ {
		if i >= len(a) || i >= len(b) || !a[i].Equal(b[i]) || a[i].Location() != b[i].Location() {
			return i
		}
	}
	return -1
}

func cronAt(ts []time.Time, i int) string {
	if i >= len(ts) {
		return "nothing"
	}
	return ts[i].Format(time.RFC3339)
}

// TestCronNextConcurrent calls Next on shared Crons from 8 goroutines; run
// it with -race.
func TestCronNextConcurrent(t *testing.T) {
	type job struct {
		c    *Cron
		from time.Time
		want []time.Time
	}
	specs := []struct{ expr, tz, from string }{
		{"*/15 * * * *", "Europe/Amsterdam", "2026-10-25T00:00:00+02:00"},
		{"30 2 * * *", "America/New_York", "2026-03-07T00:00:00-05:00"},
		{"0 * * * *", "Australia/Sydney", "2026-10-03T20:00:00+10:00"},
		{"0 9 * * 1-5", "", "2026-01-01T00:00:00Z"},
	}
	const n = 20
	var jobs []job
	for _, s := range specs {
		j := job{c: cronMustParse(t, s.expr, s.tz), from: cronTime(t, s.from)}
		for at, i := j.from, 0; i < n; i++ {
			nx, ok := j.c.Next(at)
			if !ok {
				t.Fatalf("%q: no next time", s.expr)
			}
			j.want = append(j.want, nx)
			at = nx
		}
		jobs = append(jobs, j)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 25; round++ {
				j := jobs[(g+round)%len(jobs)]
				at := j.from
				for i := 0; i < n; i++ {
					nx, ok := j.c.Next(at)
					if !ok || !nx.Equal(j.want[i]) {
						errs <- fmt.Errorf("goroutine %d: %s Next(%v) = %v, %v; want %v", g, j.c, at, nx, ok, j.want[i])
						return
					}
					at = nx
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkCronNext bounds the cost of one Next call, including the slow
// paths: a yearly expression, one that never fires (the whole five-year
// horizon is scanned), and the repeated hour of a fall-back day.
func BenchmarkCronNext(b *testing.B) {
	cases := []struct{ name, expr, tz, after string }{
		{"every-minute", "* * * * *", "Europe/Amsterdam", "2026-06-01T12:00:30+02:00"},
		{"weekdays", "0 9 * * 1-5", "America/New_York", "2026-01-02T10:00:00-05:00"},
		{"yearly", "@yearly", "Europe/Amsterdam", "2026-01-01T00:00:00+01:00"},
		{"leap-day", "0 0 29 2 *", "Australia/Sydney", "2028-03-01T00:00:00+11:00"},
		{"never", "0 0 30 2 *", "Europe/Amsterdam", "2026-01-01T00:00:00+01:00"},
		{"never-dom", "0 0 31 4,6,9,11 *", "America/New_York", "2026-01-01T00:00:00-05:00"},
		{"gap", "30 2 * * *", "Europe/Amsterdam", "2026-03-29T01:59:00+01:00"},
		{"overlap-second-pass", "* * * * *", "Europe/Amsterdam", "2026-10-25T02:00:00+01:00"},
		{"overlap-second-pass-daily", "59 2 * * *", "Europe/Amsterdam", "2026-10-25T02:59:30+01:00"},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			c := cronMustParse(b, bc.expr, bc.tz)
			after := cronTime(b, bc.after)
			for b.Loop() {
				c.Next(after)
			}
		})
	}
}

func FuzzParseCron(f *testing.F) {
	for _, s := range []string{
		"* * * * *", "*/15 * * * *", "0 9 * * 1-5", "@daily", "@yearly", "@every 5m",
		"5-10/2,30 1 * * *", "0 0 * JAN,jul Sun", "0 0 1 * MON", "0 0 */10 * MON",
		"0 0 30 2 *", "0 0 29 2 *", "30 2 * * *", "0 0 * * 7", "50/5 23 * * *",
		"* * * * * *", "1-2-3 * * * *", "*/0 * * * *", "99999999999999999999 * * * *",
		"0 0 L * *", "\t0\n0 1 1 *", "@hourly", "*,*/59 */23 1-31/30 */12 */8",
	} {
		f.Add(s)
	}
	starts := []time.Time{
		time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC),   // Amsterdam gap ahead
		time.Date(2026, 10, 24, 23, 50, 0, 0, time.UTC), // Amsterdam overlap ahead
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	f.Fuzz(func(t *testing.T, expr string) {
		for _, tz := range []string{"", "Europe/Amsterdam"} {
			c, err := ParseCron(expr, tz)
			if err != nil {
				if c != nil {
					t.Fatalf("ParseCron(%q) returned a Cron and an error", expr)
				}
				continue
			}
			if _, err := ParseCron(c.String(), tz); err != nil {
				t.Fatalf("ParseCron(%q) ok but its String %q fails: %v", expr, c.String(), err)
			}
			for _, at := range starts {
				for i := 0; i < 4; i++ {
					n, ok := c.Next(at)
					if !ok {
						break
					}
					if !n.After(at) {
						t.Fatalf("%q in %q: Next(%v) = %v, not strictly later", expr, tz, at, n)
					}
					at = n
				}
			}
		}
	})
}

// TestCronNextMemo: Next of one Cron, asked from instants in any order
// (forward in small steps, then backward, across daylight-saving changes),
// answers as a Cron that never answered before (no memo) does.
func TestCronNextMemo(t *testing.T) {
	cases := []struct{ expr, tz, day string }{
		{"* * * * *", "UTC", "2026-03-29"},
		{"30 2 * * *", "Europe/Amsterdam", "2026-03-29"},
		{"*/15 * * * *", "Europe/Amsterdam", "2026-10-25"},
		{"0,30 1 * * *", "America/New_York", "2026-11-01"},
		{"0 9 * * 1-5", "Australia/Lord_Howe", "2026-04-05"},
	}
	for _, c := range cases {
		t.Run(c.expr+" "+c.tz, func(t *testing.T) {
			loc := cronLoc(t, c.tz)
			day, err := time.ParseInLocation("2006-01-02", c.day, loc)
			if err != nil {
				t.Fatal(err)
			}
			memo := cronMustParse(t, c.expr, c.tz)
			var ats []time.Time
			for at := day.Add(-3 * time.Hour); at.Before(day.Add(27 * time.Hour)); at = at.Add(4*time.Minute + 1700*time.Millisecond) {
				ats = append(ats, at)
			}
			for i := len(ats) - 1; i >= 0; i-- {
				ats = append(ats, ats[i])
			}
			for _, at := range ats {
				got, gok := memo.Next(at)
				want, wok := cronMustParse(t, c.expr, c.tz).Next(at)
				if gok != wok || !got.Equal(want) || got.Location() != memo.Location() {
					t.Fatalf("Next(%s) = %v, %v; a fresh Cron says %v, %v", at.Format(time.RFC3339Nano), got, gok, want, wok)
				}
			}
		})
	}
}

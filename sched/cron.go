package sched

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorhill/cronexpr"
)

// Cron is a parsed five-field cron expression in a time zone. It is safe for
// concurrent use: it is never modified after ParseCron returns it.
//
// # Syntax
//
// An expression has exactly five whitespace-separated fields:
//
//	minute        0-59
//	hour          0-23
//	day-of-month  1-31
//	month         1-12 or JAN-DEC
//	day-of-week   0-7 or SUN-SAT (0 and 7 are both Sunday)
//
// Each field is a comma-separated list of items; an item is "*", a value, a
// range "a-b" (a <= b, no wrap-around), and any of those may carry a step
// "/n" ("*/15", "8-18/2"; "5/15" means "5-59/15"). A step must be between 1
// and the number of values in the field. Names are case-insensitive
// three-letter abbreviations. The macros @yearly (@annually), @monthly,
// @weekly, @daily (@midnight) and @hourly stand for "0 0 1 1 *",
// "0 0 1 * *", "0 0 * * 0", "0 0 * * *" and "0 * * * *". Six- and
// seven-field forms (seconds, year), @every, @reboot and the Quartz
// extensions (L, W, #, ?) are rejected.
//
// Classic day rule: if both day-of-month and day-of-week are restricted (the
// field does not start with "*"), a day matches when either matches, so
// "0 0 1 * MON" runs on the 1st and on every Monday. If either field starts
// with "*" (including "*/n"), both must match, as in Vixie cron.
//
// # Time zones and daylight saving time
//
// The expression is evaluated on the wall clock of its time zone; each
// matching wall-clock minute becomes one run at the following instant:
//
//   - A wall-clock time that exists once runs at that instant.
//   - A wall-clock time that does not exist because the clocks jump forward
//     (e.g. 02:30 on 2026-03-29 in Europe/Amsterdam, where 02:00 CET becomes
//     03:00 CEST) runs at the first instant after the gap, the gap's end
//     (03:00 CEST). All matching times inside one gap collapse into that
//     single run, which is also the run of a time scheduled at the gap's end
//     itself: "0 * * * *" runs at 01:00 CET, 03:00 CEST, 04:00 CEST.
//   - A wall-clock time that happens twice because the clocks fall back
//     (e.g. 02:30 on 2026-10-25 in Europe/Amsterdam, where 03:00 CEST
//     becomes 02:00 CET) runs once, at its first occurrence (02:30 CEST,
//     still summer time). During the repeated period nothing runs again for
//     a wall-clock minute that already ran: "*/15 * * * *" runs 02:00,
//     02:15, 02:30, 02:45 CEST and then 03:00 CET.
type Cron struct {
	expr    string // as given, with fields separated by single spaces
	loc     *time.Location
	minute  uint64 // bit i: minute i
	hour    uint64 // bit i: hour i
	dom     uint64 // bit i: day of month i (1-31)
	month   uint64 // bit i: month i (1-12)
	dow     uint64 // bit i: weekday i (0-6, Sunday = 0)
	domStar bool   // day-of-month field starts with "*"
	dowStar bool   // day-of-week field starts with "*"

	// ce matches the fields; cronexpr's Next mutates the expression, so
	// every use holds mu. mu also guards the last answer of Next (memo).
	mu sync.Mutex
	ce *cronexpr.Expression
	// memo is Next's last answer: for every after whose second is in
	// [memo.from, memo.next), the next time is memo.next (seconds). 10,000
	// schedules of one expression due at one minute ask for the same
	// answer 20,000 times (docs/scheduler.md, "Speed").
	memo struct{ from, next int64 }
}

// cronHorizon is how far ahead Next searches: an expression with no matching
// time within cronHorizonYears years of its argument has no next time.
const cronHorizonYears = 5

// cronMacros maps the supported @-macros to their five-field form.
var cronMacros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

type cronField struct {
	name     string
	min, max int
	names    map[string]int
}

var cronFields = [5]cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day-of-month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}},
	{name: "day-of-week", min: 0, max: 7, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}},
}

// ParseCron parses a five-field cron expression (minute hour day-of-month
// month day-of-week) or one of the macros @yearly, @annually, @monthly,
// @weekly, @daily, @midnight and @hourly, to be evaluated on the wall clock
// of the IANA time zone tz ("" means UTC). See Cron for the syntax and the
// daylight-saving-time rules. The error names what is wrong.
func ParseCron(expr, tz string) (*Cron, error) {
	loc, err := cronLocation(tz)
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(expr)
	if len(fields) == 0 {
		return nil, errors.New("cron expression is empty: want 5 fields (minute hour day-of-month month day-of-week) or a macro such as @daily")
	}
	c := &Cron{expr: strings.Join(fields, " "), loc: loc}
	if strings.HasPrefix(fields[0], "@") {
		macro := strings.ToLower(fields[0])
		switch macro {
		case "@every":
			return nil, fmt.Errorf("cron expression %q: @every is not supported; use a five-field expression such as \"*/5 * * * *\" or an every schedule", expr)
		case "@reboot":
			return nil, fmt.Errorf("cron expression %q: @reboot is not supported", expr)
		}
		std, ok := cronMacros[macro]
		if !ok {
			return nil, fmt.Errorf("cron expression %q: unknown macro %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)", expr, fields[0])
		}
		if len(fields) > 1 {
			return nil, fmt.Errorf("cron expression %q: unexpected %q after %s", expr, fields[1], fields[0])
		}
		fields = strings.Fields(std)
	}
	switch n := len(fields); {
	case n == 6 || n == 7:
		return nil, fmt.Errorf("cron expression %q has %d fields: only the 5-field form (minute hour day-of-month month day-of-week) is supported, without seconds or year fields", expr, n)
	case n != 5:
		return nil, fmt.Errorf("cron expression %q has %d fields: want 5 (minute hour day-of-month month day-of-week)", expr, n)
	}
	var sets [5]uint64
	for i, f := range fields {
		s, err := cronFields[i].parse(f)
		if err != nil {
			return nil, fmt.Errorf("cron expression %q: %v", expr, err)
		}
		sets[i] = s
	}
	c.minute, c.hour, c.dom, c.month = sets[0], sets[1], sets[2], sets[3]
	c.dow = sets[4]
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow = c.dow&^(1<<7) | 1
	}
	c.domStar = strings.HasPrefix(fields[2], "*")
	c.dowStar = strings.HasPrefix(fields[4], "*")
	// cronexpr gets the parsed sets as explicit lists: the syntax is ours
	// (it differs on details such as 7 for Sunday in ranges), the
	// matching is cronexpr's, and the day rule is applied by Next.
	ce, err := cronexpr.Parse(strings.Join([]string{cronList(c.minute), cronList(c.hour), cronList(c.dom), cronList(c.month), cronList(c.dow)}, " "))
	if err != nil {
		return nil, fmt.Errorf("cron expression %q: %v", expr, err)
	}
	c.ce = ce
	return c, nil
}

func cronLocation(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	if tz == "Local" {
		return nil, fmt.Errorf("cron time zone %q: want an IANA time zone name such as \"Europe/Amsterdam\"", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("cron time zone %q: %v", tz, err)
	}
	return loc, nil
}

// parse returns the set of values (bit v for value v) that the field text s
// selects.
func (f *cronField) parse(s string) (uint64, error) {
	var set uint64
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			return 0, fmt.Errorf("%s field %q: empty list item", f.name, s)
		}
		base, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, ok := cronNumber(stepText)
			if !ok || n < 1 || n > f.max-f.min+1 {
				return 0, fmt.Errorf("%s field %q: step %q must be a number from 1 to %d", f.name, s, stepText, f.max-f.min+1)
			}
			step = n
		}
		var lo, hi int
		switch {
		case base == "*":
			lo, hi = f.min, f.max
		case strings.Contains(base, "-"):
			a, b, _ := strings.Cut(base, "-")
			var err error
			if lo, err = f.value(s, a); err != nil {
				return 0, err
			}
			if hi, err = f.value(s, b); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("%s field %q: range %q runs backwards", f.name, s, base)
			}
		default:
			var err error
			if lo, err = f.value(s, base); err != nil {
				return 0, err
			}
			hi = lo
			if hasStep {
				hi = f.max
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

// value parses one number or name of field text s.
func (f *cronField) value(s, v string) (int, error) {
	if n, ok := cronNumber(v); ok {
		if n < f.min || n > f.max {
			return 0, fmt.Errorf("%s field %q: value %s out of range %d-%d", f.name, s, v, f.min, f.max)
		}
		return n, nil
	}
	if n, ok := f.names[strings.ToLower(v)]; ok {
		return n, nil
	}
	switch {
	case v == "":
		return 0, fmt.Errorf("%s field %q: missing value", f.name, s)
	case f.names != nil:
		return 0, fmt.Errorf("%s field %q: invalid value %q (want a number from %d to %d or a three-letter name)", f.name, s, v, f.min, f.max)
	default:
		return 0, fmt.Errorf("%s field %q: invalid value %q (want a number from %d to %d)", f.name, s, v, f.min, f.max)
	}
}

// cronNumber parses a non-empty string of ASCII digits.
func cronNumber(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil { // overflow
		return math.MaxInt, true
	}
	return n, true
}

// String returns the expression as given to ParseCron, with its fields
// separated by single spaces (macros are kept as written). The time zone is
// not included; see Location.
func (c *Cron) String() string { return c.expr }

// Location returns the time zone the expression is evaluated in.
func (c *Cron) Location() *time.Location {
	if c.loc == nil {
		return time.UTC
	}
	return c.loc
}

// Next returns the first run time strictly after after, in c's time zone,
// following the wall-clock and daylight-saving-time rules documented on Cron.
// It reports false if there is none within five years of after (for
// example "0 0 30 2 *"). Next does a bounded amount of work (at most one
// step per day of the search window, plus the matching times of the day that
// produces the result) and is safe for concurrent use.
func (c *Cron) Next(after time.Time) (time.Time, bool) {
	loc := c.Location()
	floor := after.Unix() // a whole-second instant u is after after iff u > floor
	local := after.In(loc)
	// The wall clock, read as UTC: cronexpr matches on it and, since UTC has
	// no daylight saving time, never meets a gap or an overlap (where it
	// would spin). cronInstant then maps each wall-clock match to its
	// instant under the rules documented on Cron.
	wall := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), 0, 0, time.UTC)
	limit := wall.AddDate(cronHorizonYears, 0, 0)
	// The wall clock to instant mapping never decreases, and every wall
	// time before after's own maps to an instant not after after, so the
	// first match whose instant is after after is the answer. Only the
	// minutes of a repeated (fall-back) period that already ran, and days
	// cronexpr's day rule admits but the classic one does not, are passed
	// over, so the loop is short; it is bounded all the same.
	c.mu.Lock()
	defer c.mu.Unlock()
	// The answer is the first of a fixed set of instants after floor: if
	// it was n for floor a, it is n for every floor in [a, n).
	if c.memo.next != 0 && floor >= c.memo.from && floor < c.memo.next {
		return time.Unix(c.memo.next, 0).In(loc), true
	}
	w := wall.Add(-time.Second) // cronexpr's Next is strictly after its argument
	for range 100000 {
		w = c.ce.Next(w)
		if w.IsZero() || w.After(limit) {
			return time.Time{}, false
		}
		if !c.dayMatches(w.Day(), w.Weekday()) {
			continue
		}
		if u := cronInstant(loc, w.Unix()); u > floor {
			c.memo.from, c.memo.next = floor, u
			return time.Unix(u, 0).In(loc), true
		}
	}
	return time.Time{}, false
}

// cronList writes a set as a cron list ("0,15,30,45").
func cronList(set uint64) string {
	var b strings.Builder
	for v := cronNextBit(set, 0); v >= 0; v = cronNextBit(set, v+1) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(v))
	}
	return b.String()
}

// dayMatches reports whether the day-of-month and day-of-week fields select
// day d, a weekday wd, of a month the month field selects.
func (c *Cron) dayMatches(d int, wd time.Weekday) bool {
	domOK := c.dom&(1<<uint(d)) != 0
	dowOK := c.dow&(1<<uint(wd)) != 0
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// cronNextBit returns the smallest value >= from in set, or -1.
func cronNextBit(set uint64, from int) int {
	if from < 0 {
		from = 0
	}
	if from >= 64 {
		return -1
	}
	set &^= 1<<uint(from) - 1
	if set == 0 {
		return -1
	}
	return bits.TrailingZeros64(set)
}

// cronSpan exceeds the largest UTC offset any zone has used (about 15h56m),
// so every instant whose wall clock is w lies within cronSpan of w read as
// UTC.
const cronSpan = 30 * 3600

// cronInstant returns the Unix time at which the wall clock of loc reads
// wall (seconds since 1970-01-01 00:00 read as UTC): the earliest such
// instant if the wall-clock time happens more than once (fall back), or,
// if it does not happen at all (a forward jump), the instant the jump
// happens, that is the first instant after the gap. The result never
// decreases as wall increases.
func cronInstant(loc *time.Location, wall int64) int64 {
	const none = math.MaxInt64
	best, gapEnd := int64(none), int64(none)
	t := time.Unix(wall-cronSpan, 0).In(loc)
	prevOff, havePrev := 0, false
	// Walk the zone periods (spans of one UTC offset) that can contain an
	// instant whose wall clock is wall; usually one or two.
	for range 64 {
		_, off := t.Zone()
		start, end := t.ZoneBounds()
		if u := wall - int64(off); (start.IsZero() || u >= start.Unix()) && (end.IsZero() || u < end.Unix()) && u < best {
			best = u
		}
		if havePrev && !start.IsZero() {
			// Just before start the wall clock read start+prevOff; at start it
			// reads start+off. A forward jump skips the times in between.
			if s := start.Unix(); s+int64(prevOff) <= wall && wall < s+int64(off) && s < gapEnd {
				gapEnd = s
			}
		}
		if end.IsZero() || end.Unix() > wall+cronSpan {
			break
		}
		prevOff, havePrev = off, true
		t = end.In(loc)
	}
	if best != none {
		return best
	}
	if gapEnd != none {
		return gapEnd
	}
	// Unreachable with consistent zone data; fall back to the standard
	// library's choice.
	w := time.Unix(wall, 0).UTC()
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc).Unix()
}

package sched

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func atMs(t testing.TB, s string) int64 {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixMilli()
}

func TestParseCrontab(t *testing.T) {
	tests := []struct {
		name, text, tz string
		want           []CronLine
	}{
		{"contract example", `CRON_TZ=Europe/Paris                      # applies to the lines below it
*/15 * * * *   event <pid> check the inbox            # name=inbox
0 9 * * 1-5    spawn task summarize yesterday's logs   # name=standup
@every 1h      lifecycle <pid> compact keep=80
@after 10m     event <pid> remind me to stretch
@at 2026-12-01T09:00:00Z  spawn task renew the certificate
`, "", []CronLine{
			{Line: 2, Name: "inbox", Expression: Expression{Kind: "cron", Expr: "*/15 * * * *", Timezone: "Europe/Paris"},
				Target: Target{Kind: "process.event", Pid: "<pid>", Message: "check the inbox"}},
			{Line: 3, Name: "standup", Expression: Expression{Kind: "cron", Expr: "0 9 * * 1-5", Timezone: "Europe/Paris"},
				Target: Target{Kind: "process.spawn", Profile: "task", Prompt: "summarize yesterday's logs"}},
			{Line: 4, Expression: Expression{Kind: "every", EveryMs: 3600000},
				Target: Target{Kind: "process.lifecycle", Pid: "<pid>", Action: "compact", Options: map[string]any{"keep": float64(80)}}},
			{Line: 5, Expression: Expression{Kind: "after", AfterMs: 600000},
				Target: Target{Kind: "process.event", Pid: "<pid>", Message: "remind me to stretch"}},
			{Line: 6, Expression: Expression{Kind: "at", AtMs: atMs(t, "2026-12-01T09:00:00Z")},
				Target: Target{Kind: "process.spawn", Profile: "task", Prompt: "renew the certificate"}},
		}},
		{"default zone, then switch", "0 0 * * * spawn task a\r\nCRON_TZ=Asia/Tokyo\r\n@Daily spawn task b\r\n", "America/New_York", []CronLine{
			{Line: 1, Expression: Expression{Kind: "cron", Expr: "0 0 * * *", Timezone: "America/New_York"}, Target: Target{Kind: "process.spawn", Profile: "task", Prompt: "a"}},
			{Line: 3, Expression: Expression{Kind: "cron", Expr: "@daily", Timezone: "Asia/Tokyo"}, Target: Target{Kind: "process.spawn", Profile: "task", Prompt: "b"}},
		}},
		{"empty tz is UTC; macros", "@hourly spawn p x\n@midnight spawn p x\n@weekly spawn p x\n@monthly spawn p x\n@yearly spawn p x\n@annually spawn p x", "", []CronLine{
			{Line: 1, Expression: Expression{Kind: "cron", Expr: "@hourly", Timezone: "UTC"}, Target: Target{Kind: "process.spawn", Profile: "p", Prompt: "x"}},
			{Line: 2, Expression: Expression{Kind: "cron", Expr: "@midnight", Timezone: "UTC"}, Target: Target{Kind: "process.spawn", Profile: "p", Prompt: "x"}},
			{Line: 3, Expression: Expression{Kind: "cron", Expr: "@weekly", Timezone: "UTC"}, Target: Target{Kind: "process.spawn", Profile: "p", Prompt: "x"}},
			{Line: 4, Expression: Expression{Kind: "cron", Expr: "@monthly", Timezone: "UTC"}, Target: Target{Kind: "process.spawn", Profile: "p", Prompt: "x"}},
			{Line: 5, Expression: Expression{Kind: "cron", Expr: "@yearly", Timezone: "UTC"}, Target: Target{Kind: "process.spawn", Profile: "p", Prompt: "x"}},
			{Line: 6, Expression: Expression{Kind: "cron", Expr: "@annually", Timezone: "UTC"}, Target: Target{Kind: "process.spawn", Profile: "p", Prompt: "x"}},
		}},
		{"comments, disabled, name and id, escapes", `# a comment
  # an indented comment

#disabled 30 8 * * mon-fri   spawn task water the \#plants\\n  # name=water id=sch_0123456789ab
@every 90m event p1 conv=c-1 ping   pong # id=sch_ffffffffffff
@every 1h30m event p1 conv=x
*/5 * * * * lifecycle init:1000 reset conv=c2
@after 1s lifecycle p checkpoint
@every 2h lifecycle p compact conv=c keep=5 summary=we spoke of \#1 # name=c
CRON_TZ = "Europe/Amsterdam"
0 3 1 * * spawn task \stwo leading\t
`, "", []CronLine{
			{Line: 4, Name: "water", ID: "sch_0123456789ab", Disabled: true, Expression: Expression{Kind: "cron", Expr: "30 8 * * mon-fri", Timezone: "UTC"},
				Target: Target{Kind: "process.spawn", Profile: "task", Prompt: `water the #plants\n`}},
			{Line: 5, ID: "sch_ffffffffffff", Expression: Expression{Kind: "every", EveryMs: 5400000},
				Target: Target{Kind: "process.event", Pid: "p1", ConversationID: "c-1", Message: "ping   pong"}},
			{Line: 6, Expression: Expression{Kind: "every", EveryMs: 5400000},
				Target: Target{Kind: "process.event", Pid: "p1", Message: "conv=x"}},
			{Line: 7, Expression: Expression{Kind: "cron", Expr: "*/5 * * * *", Timezone: "UTC"},
				Target: Target{Kind: "process.lifecycle", Pid: "init:1000", Action: "reset", ConversationID: "c2"}},
			{Line: 8, Expression: Expression{Kind: "after", AfterMs: 1000},
				Target: Target{Kind: "process.lifecycle", Pid: "p", Action: "checkpoint"}},
			{Line: 9, Name: "c", Expression: Expression{Kind: "every", EveryMs: 7200000},
				Target: Target{Kind: "process.lifecycle", Pid: "p", Action: "compact", ConversationID: "c",
					Options: map[string]any{"keep": float64(5), "summary": "we spoke of #1"}}},
			{Line: 11, Expression: Expression{Kind: "cron", Expr: "0 3 1 * *", Timezone: "Europe/Amsterdam"},
				Target: Target{Kind: "process.spawn", Profile: "task", Prompt: " two leading\t"}},
		}},
		{"@at in the past parses (the syscall refuses it)", "@at 2001-02-03T04:05:06.789+01:00 spawn task late", "", []CronLine{
			{Line: 1, Expression: Expression{Kind: "at", AtMs: atMs(t, "2001-02-03T03:05:06.789Z")}, Target: Target{Kind: "process.spawn", Profile: "task", Prompt: "late"}},
		}},
		{"nothing", "\n\n# only comments\n", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCrontab(tt.text, tt.tz)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got\n%s\nwant\n%s", dump(got), dump(tt.want))
			}
		})
	}
}

func dump(ls []CronLine) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%+v\n", l)
	}
	return b.String()
}

func TestParseCrontabErrors(t *testing.T) {
	tests := []struct {
		name, text string
		want       string // the error, which starts with "line N: "
	}{
		{"bad field", "# ok\n0 25 * * * spawn task x", `line 2: cron expression "0 25 * * *": hour field "25": value 25 out of range 0-23`},
		{"bad month name", "0 0 1 foo * spawn task x", `line 1: cron expression "0 0 1 foo *": month field "foo": invalid value`},
		{"four fields", "\n0 0 1 * spawn task x", "line 2: cron expression \"0 0 1 *\" has 4 fields: want 5"},
		{"six fields", "0 0 0 1 * * spawn task x", "line 1: cron expression \"0 0 0 1 * *\" has 6 fields"},
		{"no schedule", "spawn task x", "line 1: cron expression is empty"},
		{"bad zone", "0 0 * * * spawn task x\nCRON_TZ=Mars/Olympus_Mons\n", `line 2: CRON_TZ: unknown time zone "Mars/Olympus_Mons"`},
		{"Local zone", "CRON_TZ=Local", `line 1: CRON_TZ: unknown time zone "Local"`},
		{"empty zone", "CRON_TZ=", "line 1: CRON_TZ needs an IANA time zone"},
		{"other setting", "MAILTO=me", "line 1: unknown setting MAILTO: only CRON_TZ=<zone> may be set"},
		{"bad duration", "\n\n@every 5 fortnights event p hi", "line 3: @every 5: bad duration"},
		{"bad duration unit", "@after 3x event p hi", "line 1: @after 3x: bad duration"},
		{"negative duration", "@every -1h event p hi", "line 1: @every -1h: the duration must be positive"},
		{"sub-ms duration", "@every 10us event p hi", "line 1: @every 10us: the duration must be at least 1ms"},
		{"missing duration", "@after event p hi", "line 1: @after needs a duration"},
		{"bad at", "@at tomorrow spawn task x", "line 1: @at tomorrow: bad time (want an RFC 3339 time"},
		{"missing at", "@at", "line 1: @at needs an RFC 3339 time"},
		{"unknown macro", "@reboot spawn task x", "line 1: unknown schedule @reboot"},
		{"unknown target verb", "\n* * * * * run the tests", `line 2: unknown target "run": want spawn`},
		{"unknown target after macro", "@daily exec ls", `line 1: unknown target "exec"`},
		{"missing target", "* * * * *", "line 1: missing target"},
		{"missing target after every", "@every 1h # name=x", "line 1: missing target"},
		{"missing prompt", "# x\n# y\n@daily spawn task   # name=p", "line 3: spawn needs a prompt"},
		{"missing profile", "@daily spawn", "line 1: spawn needs a profile and a prompt"},
		{"blank prompt", `@daily spawn task \s`, "line 1: process.spawn needs a prompt"},
		{"missing message", "@daily event p1", "line 1: event needs a message"},
		{"missing message before comment", "@daily event p1 # name=a", "line 1: event needs a message"},
		{"missing pid", "@daily event", "line 1: event needs a pid and a message"},
		{"missing action", "@daily lifecycle p1", "line 1: lifecycle needs a pid and an action"},
		{"bad action", "@daily lifecycle p1 archive", `line 1: lifecycle action "archive": want compact, reset or checkpoint`},
		{"bad keep", "@daily lifecycle p1 compact keep=lots", "line 1: lifecycle: keep=lots: want a number"},
		{"keep on reset", "@daily lifecycle p1 reset keep=3", "line 1: lifecycle reset takes no keep="},
		{"unknown lifecycle option", "@daily lifecycle p1 compact now", `line 1: lifecycle: unexpected "now"`},
		{"empty summary", "@daily lifecycle p1 compact summary=", "line 1: lifecycle: summary= needs text"},
		{"junk in comment", "@daily spawn task hi # remember the milk", `line 1: trailing comment: unexpected "remember"`},
		{"bad name", "@daily spawn task hi # name=a/b", `line 1: trailing comment: name "a/b"`},
		{"duplicate name", "@daily spawn task hi # name=a\n@hourly spawn task ho # name=a", `line 2: name "a" is also used on line 1`},
		{"duplicate id", "@daily spawn task hi # id=x\n\n@hourly spawn task ho # id=x", `line 3: id "x" is also used on line 1`},
		{"disabled alone", "#disabled", "line 1: #disabled needs a schedule line"},
		{"disabled bad", "#disabled 99 * * * * spawn task x", "line 1: cron expression"},
		{"not UTF-8", "@daily spawn task \xff", "line 1: not valid UTF-8"},
		{"NUL", "\n@daily spawn task a\x00b", "line 2: contains a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCrontab(tt.text, "")
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error\n%q\nwant it to start with\n%q", err, tt.want)
			}
			if _, ok := err.(*CrontabError); !ok {
				t.Fatalf("error is a %T", err)
			}
		})
	}
}

func TestRenderCrontab(t *testing.T) {
	ss := []Schedule{
		{ID: "sch_000000000001", Name: "inbox", Enabled: true, Expression: Expression{Kind: "cron", Expr: "*/15  * * * *", Timezone: "Europe/Paris"},
			Target: Target{Kind: "process.event", Pid: "init:1000", Message: "check the inbox # twice\nthen stop"}},
		{ID: "sch_000000000002", Name: "hourly", Enabled: true, Expression: Expression{Kind: "every", EveryMs: 3600000, AnchorMs: ptr(5)},
			Target: Target{Kind: "process.lifecycle", Pid: "p", Action: "compact", Options: map[string]any{"keep": float64(80)}}},
		{ID: "sch_000000000003", Name: "standup", Enabled: false, Expression: Expression{Kind: "cron", Expr: "0 9 * * 1-5", Timezone: "Europe/Paris"},
			Target: Target{Kind: "process.spawn", Profile: "task", Label: "kept, not shown", Prompt: `C:\dir\n is \\ fine`}},
		{ID: "sch_000000000004", Name: "utc", Enabled: true, Expression: Expression{Kind: "cron", Expr: "@DAILY"},
			Target: Target{Kind: "process.event", Pid: "my pid", ConversationID: "c 1", Message: "conv=x is text"}},
		{ID: "sch_000000000005", Name: "once", Enabled: true, Expression: Expression{Kind: "at", AtMs: atMs(t, "2026-12-01T09:00:00.5+02:00")},
			Target: Target{Kind: "process.spawn", Profile: "task", Prompt: "  renew\tthe certificate "}},
		{ID: "sch_000000000006", Name: "later", Enabled: true, Expression: Expression{Kind: "after", AfterMs: 90 * 1000},
			Target: Target{Kind: "process.lifecycle", Pid: "p", Action: "reset", ConversationID: "main"}},
		{ID: "sch_000000000007", Name: "sum", Enabled: true, Expression: Expression{Kind: "every", EveryMs: 1500},
			Target: Target{Kind: "process.lifecycle", Pid: "p", Action: "compact", Options: map[string]any{"summary": "a # b", "other": true}}},
	}
	want := `CRON_TZ=Europe/Paris
*/15 * * * * event init:1000 check the inbox \# twice\nthen stop # name=inbox id=sch_000000000001
@every 1h lifecycle p compact keep=80 # name=hourly id=sch_000000000002
#disabled 0 9 * * 1-5 spawn task C:\dir\\n is \\\ fine # name=standup id=sch_000000000003
CRON_TZ=UTC
@daily event my\spid conv=c\s1 conv\=x is text # name=utc id=sch_000000000004
@at 2026-12-01T07:00:00.5Z spawn task \s\srenew	the certificate\s # name=once id=sch_000000000005
@after 1m30s lifecycle p reset conv=main # name=later id=sch_000000000006
@every 1.5s lifecycle p compact summary=a \# b # name=sum id=sch_000000000007
`
	got := RenderCrontab(ss)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// The rendering parses back to the same schedules, whatever the
	// parser's default zone.
	lines, err := ParseCrontab(got, "Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(ss) {
		t.Fatalf("%d lines, want %d", len(lines), len(ss))
	}
	for i, l := range lines {
		s := ss[i]
		if l.Name != s.Name || l.ID != s.ID || l.Disabled == s.Enabled {
			t.Errorf("line %d: name %q id %q disabled %v", l.Line, l.Name, l.ID, l.Disabled)
		}
		if whenKey(l.Expression) != whenKey(s.Expression) {
			t.Errorf("line %d: expression %+v, want %+v", l.Line, l.Expression, s.Expression)
		}
		if renderTarget(l.Target) != renderTarget(s.Target) {
			t.Errorf("line %d: target %+v, want %+v", l.Line, l.Target, s.Target)
		}
	}
	if got := lines[0].Target.Message; got != "check the inbox # twice\nthen stop" {
		t.Errorf("message %q", got)
	}
	if got := lines[2].Target.Prompt; got != `C:\dir\n is \\ fine` {
		t.Errorf("prompt %q", got)
	}
	if got := lines[3].Target; got.Pid != "my pid" || got.ConversationID != "c 1" || got.Message != "conv=x is text" {
		t.Errorf("event %+v", got)
	}
	if got := lines[4].Target.Prompt; got != "  renew\tthe certificate " {
		t.Errorf("prompt %q", got)
	}
	if RenderCrontab(nil) != "" {
		t.Error("no schedules should render nothing")
	}
}

func TestEscape(t *testing.T) {
	for _, s := range []string{"", "a", `\`, `\\`, `\#`, `\n`, "\\\n", `a\`, `\s`, ` `, "\t", " a ", `\ `, `#`, `=\`, "\r\n", `\\\`, `x\=y`, "a \t b", "Іñ#\\"} {
		for _, word := range []bool{true, false} {
			e := escape(s, word)
			if commentStart(e) >= 0 {
				t.Errorf("escape(%q, %v) = %q has an unescaped #", s, word, e)
			}
			if word && strings.ContainsAny(e, " \t\n\r") {
				t.Errorf("escape(%q, word) = %q has a blank", s, e)
			}
			if got := unescape(trimBlank(e)); got != s {
				t.Errorf("unescape(escape(%q, %v) = %q) = %q", s, word, e, got)
			}
		}
	}
}

// linesEqual compares what two parses say, ignoring line numbers.
func linesEqual(a, b CronLine) bool {
	a.Line, b.Line = 0, 0
	return reflect.DeepEqual(a, b)
}

// schedulesOf turns parsed lines into schedules, naming the unnamed ones.
func schedulesOf(ls []CronLine) []Schedule {
	names, ids := map[string]bool{}, map[string]bool{}
	for _, l := range ls {
		names[l.Name], ids[l.ID] = true, true
	}
	next := map[string]int{}
	fresh := func(taken map[string]bool, prefix string) string {
		for ; ; next[prefix]++ {
			if s := fmt.Sprintf("%s%d", prefix, next[prefix]); !taken[s] {
				taken[s] = true
				return s
			}
		}
	}
	ss := make([]Schedule, len(ls))
	for i, l := range ls {
		s := Schedule{ID: l.ID, Name: l.Name, Enabled: !l.Disabled, Expression: l.Expression, Target: l.Target}
		if s.Name == "" {
			s.Name = fresh(names, "gen")
		}
		if s.ID == "" {
			s.ID = fresh(ids, "sch_gen")
		}
		ss[i] = s
	}
	return ss
}

func FuzzParseCrontab(f *testing.F) {
	for _, s := range []string{
		"CRON_TZ=Europe/Paris\n*/15 * * * * event <pid> check the inbox # name=inbox\n",
		"0 9 * * 1-5 spawn task summarize yesterday's logs # name=standup id=sch_0123456789ab",
		"@every 1h lifecycle p compact keep=80 summary=s \\# x",
		"@after 10m event p conv=c remind me\n#disabled @at 2026-12-01T09:00:00Z spawn task renew",
		"@every 1h event p conv\\=x \\s\\tmsg\\\\n\\",
		"@daily lifecycle p reset conv=\\",
		"# comment\n\n@hourly spawn \\s \\#",
		"@every 1.5ms event p \\",
		"@every 1h package release-tools relnotes tick {\"n\":1} # name=tick",
		"@daily package alice/x run go [1,\\#2]",
		"@hourly package p e",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		lines, err := ParseCrontab(text, "UTC")
		if err != nil {
			if _, ok := err.(*CrontabError); !ok {
				t.Fatalf("error is a %T: %v", err, err)
			}
			return
		}
		ss := schedulesOf(lines)
		out := RenderCrontab(ss)
		again, err := ParseCrontab(out, "America/Los_Angeles")
		if err != nil {
			t.Fatalf("rendering does not parse: %v\ninput %q\nrendered %q", err, text, out)
		}
		if len(again) != len(lines) {
			t.Fatalf("%d lines, then %d\nrendered %q", len(lines), len(again), out)
		}
		for i := range lines {
			want := lines[i]
			want.Name, want.ID = ss[i].Name, ss[i].ID
			if !linesEqual(again[i], want) {
				t.Fatalf("line %d changed:\n%+v\n%+v\ninput %q\nrendered %q", i, want, again[i], text, out)
			}
		}
		if out2 := RenderCrontab(schedulesOf(again)); out2 != out {
			t.Fatalf("rendering is not stable:\n%q\n%q", out, out2)
		}
	})
}

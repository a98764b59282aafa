package sched

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// The crontab format: one schedule a line.
//
//	# a comment
//	CRON_TZ=Europe/Paris                         (the zone of the cron lines below it)
//	*/15 * * * *  event <pid> check the inbox    # name=inbox id=sch_0123456789ab
//	0 9 * * 1-5   spawn task summarize the logs  # name=standup
//	@every 1h     lifecycle <pid> compact keep=80
//	@after 10m    event <pid> conv=<cid> remind me to stretch
//	@at 2026-12-01T09:00:00Z  spawn task renew the certificate
//	#disabled @daily spawn task tidy up          # name=tidy
//
// A schedule line is <when> <target> [# name=<name> [id=<id>]]. <when> is
// five cron fields, a cron macro (@hourly, @daily, @midnight, @weekly,
// @monthly, @yearly, @annually), @every <duration>, @after <duration> (Go
// durations: 90s, 15m, 1h30m) or @at <RFC 3339 time>. <target> is one of
//
//	spawn <profile> <prompt...>
//	event <pid> [conv=<cid>] <message...>
//	lifecycle <pid> compact [conv=<cid>] [keep=<n>] [summary=<text...>]
//	lifecycle <pid> reset|checkpoint [conv=<cid>]
//
// Free text (a prompt, a message, a summary) runs to the end of the line or
// to the first '#' not written as `\#`, which starts the trailing comment.
// In free text and words a backslash escapes: `\#` is '#', `\\` is '\',
// `\n` a newline, `\r` a carriage return, `\t` a tab, `\s` a space, `\=`
// '='; any other backslash is itself.

// CronLine is one schedule line of a crontab.
type CronLine struct {
	Line       int    // 1-based line number in the text
	Name       string // name= of the trailing comment, or ""
	ID         string // id= of the trailing comment, or ""
	Disabled   bool   // written as "#disabled <schedule line>"
	Expression abi.Expression
	Target     abi.Target
}

// CrontabError is a crontab line that does not parse.
type CrontabError struct {
	Line int
	Msg  string
}

func (e *CrontabError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// MaxCrontabLines is the most schedule lines one crontab may hold.
const MaxCrontabLines = 10000

var settingLine = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*[ \t]*=`)

// ParseCrontab parses a crontab. tz is the time zone of cron lines before
// the first CRON_TZ= line ("" means UTC). Blank lines and comments are
// skipped; every other line must parse, and the error of the first that
// does not names its line number and what is wrong.
func ParseCrontab(text, tz string) ([]CronLine, error) {
	if tz == "" {
		tz = "UTC"
	}
	if _, err := cronLocation(tz); err != nil {
		return nil, &CrontabError{0, err.Error()}
	}
	var out []CronLine
	names := map[string]int{}
	ids := map[string]int{}
	p := newLineParser(tz)
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		cl, err := p.parse(line, n)
		if err != nil {
			return nil, err
		}
		if cl == nil {
			continue
		}
		if cl.Name != "" {
			if prev, dup := names[cl.Name]; dup {
				return nil, &CrontabError{n, fmt.Sprintf("name %q is also used on line %d", cl.Name, prev)}
			}
			names[cl.Name] = n
		}
		if cl.ID != "" {
			if prev, dup := ids[cl.ID]; dup {
				return nil, &CrontabError{n, fmt.Sprintf("id %q is also used on line %d", cl.ID, prev)}
			}
			ids[cl.ID] = n
		}
		if len(out) == MaxCrontabLines {
			return nil, &CrontabError{n, fmt.Sprintf("too many schedules: a crontab holds at most %d", MaxCrontabLines)}
		}
		out = append(out, *cl)
	}
	return out, nil
}

// CheckCrontabLines checks that each line of text, the complete lines of a
// crontab from line number first on, parses as ParseCrontab would parse it
// (a line's meaning does not depend on the lines before it but for its
// zone, which ParseCrontab checks at the CRON_TZ= line). What only the
// whole text can tell (a name or an id used twice, too many lines) is not
// checked. The error names the line.
func CheckCrontabLines(text string, first int) error {
	_, err := countCrontabLines(text, first)
	return err
}

// countCrontabLines checks lines as CheckCrontabLines does and returns
// how many of them are schedules (not blank, comment or CRON_TZ= lines).
func countCrontabLines(text string, first int) (int, error) {
	p := newLineParser("UTC")
	text = strings.TrimSuffix(text, "\n")
	n := 0
	for i, line := range strings.Split(text, "\n") {
		cl, err := p.parse(line, first+i)
		if err != nil {
			return 0, err
		}
		if cl != nil {
			n++
		}
	}
	return n, nil
}

// lineParser parses crontab lines one at a time, keeping the zone set by
// CRON_TZ= lines.
type lineParser struct {
	zone string
	// Cron fields are checked in UTC (the zone of a line is checked at
	// its CRON_TZ= line), once per distinct expression.
	cronErrs map[string]error
}

func newLineParser(zone string) *lineParser {
	return &lineParser{zone: zone, cronErrs: map[string]error{}}
}

func (p *lineParser) checkCron(expr string) error {
	err, ok := p.cronErrs[expr]
	if !ok {
		_, err = ParseCron(expr, "")
		if len(p.cronErrs) < 1024 {
			p.cronErrs[expr] = err
		}
	}
	return err
}

// parse parses line number n: a schedule line, or nil for a blank line, a
// comment or a CRON_TZ= line.
func (p *lineParser) parse(line string, n int) (*CronLine, error) {
	line = strings.TrimSuffix(line, "\r")
	if !utf8.ValidString(line) {
		return nil, &CrontabError{n, "not valid UTF-8"}
	}
	if strings.IndexByte(line, 0) >= 0 {
		return nil, &CrontabError{n, "contains a NUL byte"}
	}
	t := trimBlank(line)
	if t == "" {
		return nil, nil
	}
	disabled := false
	if t[0] == '#' {
		rest, ok := strings.CutPrefix(t, "#disabled")
		if !ok || (rest != "" && !isBlank(rest[0])) {
			return nil, nil // a comment
		}
		if trimBlank(rest) == "" {
			return nil, &CrontabError{n, "#disabled needs a schedule line after it"}
		}
		t, disabled = trimBlank(rest), true
	} else if settingLine.MatchString(t) {
		key, val, _ := strings.Cut(t, "=")
		key = trimBlank(key)
		if i := strings.IndexByte(val, '#'); i >= 0 {
			val = val[:i] // a trailing comment
		}
		if key != "CRON_TZ" {
			return nil, &CrontabError{n, fmt.Sprintf("unknown setting %s: only CRON_TZ=<zone> may be set", key)}
		}
		val = unquote(trimBlank(val))
		if val == "" {
			return nil, &CrontabError{n, "CRON_TZ needs an IANA time zone such as Europe/Paris"}
		}
		if _, err := cronLocation(val); err != nil {
			return nil, &CrontabError{n, fmt.Sprintf("CRON_TZ: unknown time zone %q", val)}
		}
		p.zone = val
		return nil, nil
	}
	cl, err := parseScheduleLine(t, p.zone, p.checkCron)
	if err != nil {
		return nil, &CrontabError{n, err.Error()}
	}
	cl.Line, cl.Disabled = n, disabled
	return &cl, nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func trimBlank(s string) string { return strings.Trim(s, " \t") }

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// token is one blank-separated word of a line, with its position.
type token struct {
	text       string
	start, end int
}

func tokenize(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		for i < len(s) && isBlank(s[i]) {
			i++
		}
		if i == len(s) {
			break
		}
		j := i
		for j < len(s) && !isBlank(s[j]) {
			j++
		}
		out = append(out, token{s[i:j], i, j})
		i = j
	}
	return out
}

// escapable are the characters a backslash escapes.
func escapable(c byte) bool {
	switch c {
	case '\\', '#', 'n', 'r', 't', 's', '=':
		return true
	}
	return false
}

// commentStart returns the index of the first '#' not escaped, or -1.
func commentStart(s string) int {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && escapable(s[i+1]):
			i++
		case s[i] == '#':
			return i
		}
	}
	return -1
}

// unescape undoes the escapes of free text and words.
func unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) && escapable(s[i+1]) {
			i++
			switch s[i] {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 's':
				c = ' '
			default:
				c = s[i]
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// escape renders s so that unescape (after the line is cut into words or
// trimmed as free text) gives s back. word escapes every blank; free text
// only blanks at its ends.
func escape(s string, word bool) string {
	// units[i] is the rendering of s[i].
	units := make([]string, len(s))
	lead := len(s) - len(strings.TrimLeft(s, " \t")) // s[:lead] is blank
	trail := len(strings.TrimRight(s, " \t"))        // s[trail:] is blank
	for i := 0; i < len(s); i++ {
		c := s[i]
		edge := word || i < lead || i >= trail
		switch {
		case c == '#':
			units[i] = `\#`
		case c == '\n':
			units[i] = `\n`
		case c == '\r':
			units[i] = `\r`
		case c == ' ' && edge:
			units[i] = `\s`
		case c == '\t' && edge:
			units[i] = `\t`
		default:
			units[i] = s[i : i+1]
		}
	}
	// A backslash is doubled when what follows it in the output would
	// otherwise make an escape of it.
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\\' && i+1 < len(s) && escapable(units[i+1][0]) {
			units[i] = `\\`
		}
	}
	return strings.Join(units, "")
}

var targetVerbs = map[string]bool{"spawn": true, "event": true, "lifecycle": true, "package": true}

const targetUsage = "want spawn <profile> <prompt...>, event <pid> <message...> or lifecycle <pid> compact|reset|checkpoint"

// parseScheduleLine parses <when> <target> [# name=<n> [id=<id>]] in zone,
// checking cron fields with checkCron.
func parseScheduleLine(s, zone string, checkCron func(string) error) (CronLine, error) {
	var cl CronLine
	body, comment := s, ""
	if i := commentStart(s); i >= 0 {
		body, comment = s[:i], s[i+1:]
	}
	if err := parseTrailer(comment, &cl); err != nil {
		return cl, err
	}
	toks := tokenize(body)
	if len(toks) == 0 {
		return cl, fmt.Errorf("missing schedule before the comment")
	}
	// When.
	w := 0
	first := toks[0].text
	if strings.HasPrefix(first, "@") {
		kw := strings.ToLower(first)
		switch kw {
		case "@every", "@after":
			if len(toks) < 2 || targetVerbs[toks[1].text] {
				return cl, fmt.Errorf("%s needs a duration such as 90s, 15m or 1h30m", kw)
			}
			d, err := time.ParseDuration(toks[1].text)
			if err != nil {
				return cl, fmt.Errorf("%s %s: bad duration (want a Go duration such as 90s, 15m or 1h30m)", kw, toks[1].text)
			}
			if d <= 0 {
				return cl, fmt.Errorf("%s %s: the duration must be positive", kw, toks[1].text)
			}
			ms := d.Milliseconds()
			if ms == 0 {
				return cl, fmt.Errorf("%s %s: the duration must be at least 1ms", kw, toks[1].text)
			}
			if ms > HorizonMs {
				return cl, fmt.Errorf("%s %s: the duration must be at most 100 years", kw, toks[1].text)
			}
			if kw == "@every" {
				if ms < MinEveryMs {
					return cl, fmt.Errorf("@every %s: the interval must be at least 1s", toks[1].text)
				}
				cl.Expression = abi.Expression{Kind: "every", EveryMs: ms}
			} else {
				cl.Expression = abi.Expression{Kind: "after", AfterMs: ms}
			}
			w = 2
		case "@at":
			if len(toks) < 2 || targetVerbs[toks[1].text] {
				return cl, fmt.Errorf("@at needs an RFC 3339 time such as 2026-12-01T09:00:00Z")
			}
			at, err := time.Parse(time.RFC3339, toks[1].text)
			if err != nil {
				return cl, fmt.Errorf("@at %s: bad time (want an RFC 3339 time such as 2026-12-01T09:00:00Z)", toks[1].text)
			}
			cl.Expression = abi.Expression{Kind: "at", AtMs: at.UnixMilli()}
			w = 2
		default:
			if err := checkCron(kw); err != nil {
				return cl, fmt.Errorf("unknown schedule %s (want five cron fields, @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually, @every <duration>, @after <duration> or @at <time>)", first)
			}
			cl.Expression = abi.Expression{Kind: "cron", Expr: kw, Timezone: zone}
			w = 1
		}
	} else {
		v := -1
		for i, t := range toks {
			if targetVerbs[t.text] {
				v = i
				break
			}
		}
		switch {
		case v < 0 && len(toks) <= 5:
			if err := checkCron(joinTokens(toks)); err != nil {
				return cl, err
			}
			return cl, fmt.Errorf("missing target: %s", targetUsage)
		case v < 0:
			if err := checkCron(joinTokens(toks[:5])); err != nil {
				return cl, err
			}
			return cl, fmt.Errorf("unknown target %q: %s", toks[5].text, targetUsage)
		case v != 5:
			if err := checkCron(joinTokens(toks[:v])); err != nil {
				return cl, err
			}
			return cl, fmt.Errorf("want 5 cron fields before the target, found %d", v)
		}
		expr := joinTokens(toks[:5])
		if err := checkCron(expr); err != nil {
			return cl, err
		}
		cl.Expression = abi.Expression{Kind: "cron", Expr: expr, Timezone: zone}
		w = 5
	}
	// Target.
	if w >= len(toks) {
		return cl, fmt.Errorf("missing target: %s", targetUsage)
	}
	rest := func(i int) string { // free text from token i on
		if i >= len(toks) {
			return ""
		}
		return unescape(trimBlank(body[toks[i].start:]))
	}
	switch verb := toks[w].text; verb {
	case "spawn":
		if w+1 >= len(toks) {
			return cl, fmt.Errorf("spawn needs a profile and a prompt: spawn <profile> <prompt...>")
		}
		prompt := rest(w + 2)
		if prompt == "" {
			return cl, fmt.Errorf("spawn needs a prompt: spawn <profile> <prompt...>")
		}
		cl.Target = abi.Target{Kind: abi.TargetSpawn, Profile: unescape(toks[w+1].text), Prompt: prompt}
	case "event":
		if w+1 >= len(toks) {
			return cl, fmt.Errorf("event needs a pid and a message: event <pid> [conv=<cid>] <message...>")
		}
		t := abi.Target{Kind: abi.TargetEvent, Pid: unescape(toks[w+1].text)}
		i := w + 2
		if i+1 < len(toks) && strings.HasPrefix(toks[i].text, "conv=") && len(toks[i].text) > len("conv=") {
			t.ConversationID = unescape(toks[i].text[len("conv="):])
			i++
		}
		t.Message = rest(i)
		if t.Message == "" {
			return cl, fmt.Errorf("event needs a message: event <pid> [conv=<cid>] <message...>")
		}
		cl.Target = t
	case "package":
		if w+3 >= len(toks) {
			return cl, fmt.Errorf("package needs a package, an entrypoint and an event: package <packageId> <entrypoint> <event> [payload]")
		}
		t := abi.Target{Kind: abi.TargetPackage, PackageID: unescape(toks[w+1].text), Entrypoint: unescape(toks[w+2].text),
			Event: unescape(toks[w+3].text)}
		if p := rest(w + 4); p != "" {
			if !json.Valid([]byte(p)) {
				return cl, fmt.Errorf("package: the payload is not JSON")
			}
			t.Payload = json.RawMessage(p)
		}
		cl.Target = t
	case "lifecycle":
		if w+2 >= len(toks) {
			return cl, fmt.Errorf("lifecycle needs a pid and an action: lifecycle <pid> compact|reset|checkpoint")
		}
		t := abi.Target{Kind: abi.TargetLifecycle, Pid: unescape(toks[w+1].text), Action: toks[w+2].text}
		switch t.Action {
		case "compact", "reset", "checkpoint":
		default:
			return cl, fmt.Errorf("lifecycle action %q: want compact, reset or checkpoint", t.Action)
		}
	opts:
		for i := w + 3; i < len(toks); i++ {
			word := toks[i].text
			key, val, _ := strings.Cut(word, "=")
			if !strings.Contains(word, "=") {
				key = ""
			}
			if (key == "keep" || key == "summary") && t.Action != "compact" {
				return cl, fmt.Errorf("lifecycle %s takes no %s= (only compact does)", t.Action, key)
			}
			switch key {
			case "conv":
				if val == "" || t.ConversationID != "" {
					return cl, fmt.Errorf("lifecycle: conv= needs one conversation id")
				}
				t.ConversationID = unescape(val)
			case "keep":
				k, err := strconv.Atoi(val)
				if err != nil || k < 1 || k > 1000000 {
					return cl, fmt.Errorf("lifecycle: keep=%s: want a number of messages from 1 to 1000000", val)
				}
				if t.Options == nil {
					t.Options = map[string]any{}
				}
				if _, dup := t.Options["keep"]; dup {
					return cl, fmt.Errorf("lifecycle: keep= given twice")
				}
				t.Options["keep"] = float64(k)
			case "summary":
				sum := unescape(trimBlank(body[toks[i].start+len("summary="):]))
				if sum == "" {
					return cl, fmt.Errorf("lifecycle: summary= needs text")
				}
				if t.Options == nil {
					t.Options = map[string]any{}
				}
				t.Options["summary"] = sum
				break opts
			default:
				return cl, fmt.Errorf("lifecycle: unexpected %q (want conv=<cid>, keep=<n> or summary=<text>)", word)
			}
		}
		cl.Target = t
	default:
		return cl, fmt.Errorf("unknown target %q: %s", verb, targetUsage)
	}
	if err := validateTarget(&cl.Target); err != nil {
		return cl, err
	}
	return cl, nil
}

func joinTokens(ts []token) string {
	ss := make([]string, len(ts))
	for i, t := range ts {
		ss[i] = t.text
	}
	return strings.Join(ss, " ")
}

// parseTrailer reads name= and id= from a trailing comment.
func parseTrailer(comment string, cl *CronLine) error {
	for _, w := range strings.Fields(comment) {
		key, val, ok := strings.Cut(w, "=")
		switch {
		case ok && key == "name":
			if cl.Name != "" {
				return fmt.Errorf("trailing comment: name= given twice")
			}
			if !validName.MatchString(val) {
				return fmt.Errorf("trailing comment: name %q: names are 1-64 of [A-Za-z0-9_.-]", val)
			}
			cl.Name = val
		case ok && key == "id":
			if cl.ID != "" {
				return fmt.Errorf("trailing comment: id= given twice")
			}
			if !validName.MatchString(val) { // ids are of the names' alphabet
				return fmt.Errorf("trailing comment: bad id %q", val)
			}
			cl.ID = val
		default:
			return fmt.Errorf("trailing comment: unexpected %q (want name=<name> [id=<id>]; write a # inside text as \\#)", w)
		}
	}
	return nil
}

// RenderCrontab renders schedules as a crontab, one line each in the order
// given, each ending with "# name=<name> id=<id>"; disabled ones are
// "#disabled <line>". A CRON_TZ= line precedes the first cron line and
// every cron line whose zone differs from the one above it, so the text
// parses to the same lines whatever the parser's default zone.
func RenderCrontab(ss []abi.Schedule) string {
	var b strings.Builder
	zone := ""
	for i := range ss {
		s := &ss[i]
		if s.Broken != "" {
			// A damaged record is a comment: no line of the text is
			// it, and a write of the text leaves it as it is.
			b.WriteString("#broken " + oneLine(fmt.Sprintf("id=%s name=%s: %s; remove it: echo 'remove %s' > /var/spool/cron/ctl", s.ID, s.Name, s.Broken, s.ID)) + "\n")
			continue
		}
		if z := zoneOf(s.Expression); z != "" && z != zone {
			b.WriteString("CRON_TZ=" + z + "\n")
			zone = z
		}
		if !s.Enabled {
			b.WriteString("#disabled ")
		}
		b.WriteString(renderBody(s.Expression, s.Target))
		b.WriteString(" # name=" + s.Name + " id=" + s.ID + "\n")
	}
	return b.String()
}

// oneLine is s with every control character, and every character that
// is not valid UTF-8, written as a Go escape: text of a damaged record
// that a crontab shows cannot start a line of its own.
func oneLine(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			b.WriteString(strings.Trim(strconv.QuoteRune(r), "'"))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// zoneOf is the zone a cron expression runs in ("" for the other kinds).
func zoneOf(e abi.Expression) string {
	if e.Kind != "cron" {
		return ""
	}
	if e.Timezone == "" {
		return "UTC"
	}
	return e.Timezone
}

// renderBody renders "<when> <target>".
func renderBody(e abi.Expression, t abi.Target) string {
	return renderWhen(e) + " " + renderTarget(t)
}

func renderWhen(e abi.Expression) string {
	switch e.Kind {
	case "cron":
		expr := strings.Join(strings.Fields(e.Expr), " ")
		if strings.HasPrefix(expr, "@") {
			expr = strings.ToLower(expr)
		}
		return expr
	case "every":
		return "@every " + abi.FormatMs(e.EveryMs)
	case "after":
		return "@after " + abi.FormatMs(e.AfterMs)
	case "at":
		return "@at " + time.UnixMilli(e.AtMs).UTC().Format("2006-01-02T15:04:05.999Z07:00")
	}
	return "@" + e.Kind
}

func renderTarget(t abi.Target) string {
	word := func(s string) string { return escape(s, true) }
	text := func(s string) string { return escape(s, false) }
	switch t.Kind {
	case abi.TargetSpawn:
		profile := t.Profile
		if profile == "" {
			profile = "task"
		}
		return "spawn " + word(profile) + " " + text(t.Prompt)
	case abi.TargetEvent:
		s := "event " + word(t.Pid)
		if t.ConversationID != "" {
			s += " conv=" + word(t.ConversationID)
		}
		msg := text(t.Message)
		if strings.HasPrefix(msg, "conv=") {
			msg = `conv\=` + msg[len("conv="):] // not an option
		}
		return s + " " + msg
	case abi.TargetPackage:
		s := "package " + word(t.PackageID) + " " + word(t.Entrypoint) + " " + word(t.Event)
		if len(t.Payload) > 0 {
			s += " " + text(string(t.Payload))
		}
		return s
	case abi.TargetLifecycle:
		s := "lifecycle " + word(t.Pid) + " " + word(t.Action)
		if t.ConversationID != "" {
			s += " conv=" + word(t.ConversationID)
		}
		if t.Action == "compact" {
			if k, ok := optInt(t.Options["keep"]); ok {
				s += " keep=" + strconv.FormatInt(k, 10)
			}
			if sum, ok := t.Options["summary"].(string); ok && sum != "" {
				s += " summary=" + text(sum)
			}
		}
		return s
	}
	return t.Kind
}

// optInt reads a whole number from a target option (float64 after JSON).
func optInt(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	case int:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

// whenKey is what a crontab says about an expression: two expressions with
// the same key are the same schedule line's <when> (an every's anchor, for
// one, is not said).
func whenKey(e abi.Expression) string {
	return zoneOf(e) + "\n" + renderWhen(e)
}

// mergeTarget returns old with what a crontab line says replaced by new's:
// what the line cannot say (a spawn's label, an event's data, other
// options) is kept while the kind stays the same.
func mergeTarget(old, new abi.Target) abi.Target {
	if old.Kind != new.Kind {
		return new
	}
	t := old
	switch new.Kind {
	case abi.TargetSpawn:
		t.Profile, t.Prompt = new.Profile, new.Prompt
	case abi.TargetEvent:
		t.Pid, t.ConversationID, t.Message = new.Pid, new.ConversationID, new.Message
	case abi.TargetPackage:
		t.PackageID, t.Entrypoint, t.Event, t.Payload = new.PackageID, new.Entrypoint, new.Event, new.Payload
	case abi.TargetLifecycle:
		t.Pid, t.ConversationID, t.Action = new.Pid, new.ConversationID, new.Action
		opts := map[string]any{}
		for k, v := range old.Options {
			if k != "keep" && k != "summary" {
				opts[k] = v
			}
		}
		for k, v := range new.Options {
			opts[k] = v
		}
		t.Options = nil
		if len(opts) > 0 {
			t.Options = opts
		}
	}
	return t
}

package adapters

import (
	"strings"
	"testing"
)

// FuzzChatCommand: a chat message read as a command or an answer never
// panics; a command names only /use or /where (or their usage); an
// answer is one of the known words.
func FuzzChatCommand(f *testing.F) {
	for _, s := range []string{"/use p_1", "/use", "/where", "/where now", "/USE init", "yes", "No.", "always!", "continue", "stop", "/use a b", " /use\tp ", "/", "", "\xff/use"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		cmd, ok := parseCommand(text)
		if ok {
			switch cmd.Name {
			case "use", "where", "usage":
			default:
				t.Fatalf("%q: command %+v", text, cmd)
			}
			if !strings.HasPrefix(strings.TrimSpace(text), "/") {
				t.Fatalf("%q read as a command", text)
			}
			if strings.ContainsAny(cmd.Arg, " \t\n") {
				t.Fatalf("%q: an argument with blanks %q", text, cmd.Arg)
			}
		}
		switch a := parseAnswer(text); a {
		case "", answerApprove, answerDeny, answerAlways, answerContinue, answerStop:
		default:
			t.Fatalf("%q: answer %q", text, a)
		}
		if c := normalizeCode(text); c != "" && !codeRE.MatchString(c) {
			t.Fatalf("%q: code %q", text, c)
		}
	})
}

// TestTraceOf: any message id gives a trace proc.send takes, the same
// every time; a safe one is kept readable.
func TestTraceOf(t *testing.T) {
	for _, id := range []string{"42:7", "CAB+x=y@mail.example.com", strings.Repeat("m", 200), "a b\x00c"} {
		tr := traceOf("email", "mail", id)
		if len(tr) > 128 || tr != traceOf("email", "mail", id) || strings.ContainsAny(tr, "@+= \x00") {
			t.Errorf("traceOf(%q) = %q", id, tr)
		}
	}
	if tr := traceOf("telegram", "main", "42:7"); tr != "adapter:telegram/main/42:7" {
		t.Errorf("a safe id: %q", tr)
	}
}

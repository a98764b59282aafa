package adapters

import (
	"strings"
	"unicode/utf8"
)

// Chat commands and answers: what a linked user writes in a chat that the
// room answers itself instead of handing it to a process.
//
//	/use <pid>     this chat's messages go to process pid (/use init: the user's init again)
//	/use           the same as /use init
//	/where         which process this chat's messages go to
//
// An answer to a pending approval is one word, any case, with an
// optional final '.' or '!': yes (y, approve, ok), no (n, deny), always;
// to a parked checkpoint: continue, stop.

// command is a parsed chat command: Name "use" or "where", Arg the
// process for /use ("" for none).
type command struct {
	Name string
	Arg  string
}

// maxCommand is the longest text read as a command.
const maxCommand = 512

// parseCommand reads text as a chat command: false when it is not one
// (it does not start with "/use" or "/where" as a word). A command with
// the wrong number of words is still a command, with Name "usage".
func parseCommand(text string) (command, bool) {
	text = strings.TrimSpace(text)
	if len(text) > maxCommand || !strings.HasPrefix(text, "/") || !utf8.ValidString(text) {
		return command{}, false
	}
	words := strings.Fields(text)
	switch strings.ToLower(words[0]) {
	case "/use":
		switch len(words) {
		case 1:
			return command{Name: "use"}, true
		case 2:
			return command{Name: "use", Arg: words[1]}, true
		}
		return command{Name: "usage"}, true
	case "/where":
		if len(words) != 1 {
			return command{Name: "usage"}, true
		}
		return command{Name: "where"}, true
	}
	return command{}, false
}

// Answers a chat message may be.
const (
	answerApprove  = "approve"
	answerDeny     = "deny"
	answerAlways   = "always"
	answerContinue = "continue"
	answerStop     = "stop"
)

// parseAnswer reads text as an answer word: "" when it is none.
func parseAnswer(text string) string {
	w := strings.ToLower(strings.TrimSpace(text))
	if len(w) > 16 {
		return ""
	}
	w = strings.TrimRight(w, ".!")
	switch w {
	case "yes", "y", "approve", "ok":
		return answerApprove
	case "no", "n", "deny":
		return answerDeny
	case "always":
		return answerAlways
	case "continue":
		return answerContinue
	case "stop":
		return answerStop
	}
	return ""
}

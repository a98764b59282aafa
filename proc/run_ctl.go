package proc

import (
	"encoding/json"
	"fmt"
	"strconv"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// The run verbs of /proc/<pid>/ctl (docs/runs.md):
//
//	continue [checkpoint=N] [extend-budget usd=..|dollars=.. tokens=.. turns=.. time=..
//	         | refocus <text> | swap-model <model> | set-temperature <t>
//	         | set-tool-cap <n> | inject [role=system|user] <text>]
//	stop | start | supervise [grace=<ms|duration>] | supervise off
//	budget [usd=..] [tokens=..] [turns=..] [time=..] [on-exhaust=pause|abort]
//	extend-budget ... | refocus <text> | swap-model <model>
//	set-temperature <t> | set-tool-cap <n>
//
// The effect verbs are a continue of the checkpoint the run is parked at
// (else its next) with that one effect.

// durationMs parses v as milliseconds or a Go duration (ns.DurationMs).
func durationMs(key, v string) (int64, error) { return ns.DurationMs(key, v) }

// leadLine is a ctl line's leading words, its leading options (of keys)
// and the text after them (ns.SplitLead).
type leadLine struct {
	words []string
	opts  map[string]string
	text  string
}

// splitLead splits rest into n words, then the options of keys that
// follow them, then the text (ns.SplitLead).
func splitLead(rest string, n int, keys ...string) (leadLine, error) {
	l, err := ns.SplitLead(rest, n, keys...)
	return leadLine{l.Words, l.Opts, l.Text}, err
}

// budgetOpts reads the budget options of l into b (those given).
func budgetOpts(l ns.CtlLine, b *abi.RunBudget) error {
	if v, ok := l.LookupOpt("usd"); ok {
		f, err := abi.ParseFinite("usd", v)
		if err != nil {
			return err
		}
		b.USD = f
	}
	for _, k := range []struct {
		key string
		p   *int64
	}{{"tokens", &b.Tokens}, {"turns", &b.Turns}} {
		if v, ok := l.LookupOpt(k.key); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return abi.E(abi.Invalid, fmt.Sprintf("%s=%q is not a number", k.key, v))
			}
			*k.p = n
		}
	}
	if v, ok := l.LookupOpt("time"); ok {
		n, err := durationMs("time", v)
		if err != nil {
			return err
		}
		b.TimeMs = n
	}
	if v, ok := l.LookupOpt("on-exhaust"); ok {
		b.OnExhaust = v
	}
	return nil
}

// effectOf makes the one effect of an effect verb (its words after the
// verb: words; its free text: text).
func effectOf(op string, l ns.CtlLine, words []string, text string) (abi.Effect, error) {
	e := abi.Effect{Op: op}
	switch op {
	case "extend-budget":
		if len(words) != 0 {
			return e, abi.E(abi.Invalid, "usage: extend-budget [usd=..|dollars=..] [tokens=..] [turns=..] [time=..]")
		}
		var b abi.RunBudget
		if err := budgetOpts(l, &b); err != nil {
			return e, err
		}
		if v, ok := l.LookupOpt("dollars"); ok { // the seed's name of usd
			f, err := abi.ParseFinite("dollars", v)
			if err != nil {
				return e, err
			}
			if _, same := abi.DollarsOf(b.USD, f); !same {
				return e, abi.E(abi.Invalid, "extend-budget: usd and dollars (the seed's name of it) differ: give one")
			}
			b.USD = f
		}
		e.USD, e.Tokens, e.Turns, e.TimeMs = b.USD, b.Tokens, b.Turns, b.TimeMs
	case "refocus":
		if text == "" {
			return e, abi.E(abi.Invalid, "usage: refocus <text...>")
		}
		e = abi.Effect{Op: "inject-message", Role: "system", Content: "Refocus: " + text}
	case "inject", "inject-message":
		if text == "" {
			return e, abi.E(abi.Invalid, "usage: inject [role=system|user] <text...>")
		}
		e = abi.Effect{Op: "inject-message", Role: l.Opt("role"), Content: text}
	case "swap-model":
		if len(words) != 1 {
			return e, abi.E(abi.Invalid, "usage: swap-model <model>")
		}
		e.Model = words[0]
	case "set-temperature":
		if len(words) != 1 {
			return e, abi.E(abi.Invalid, "usage: set-temperature <0..2>")
		}
		t, err := abi.ParseFinite("temperature", words[0])
		if err != nil || !(t >= 0 && t <= 2) {
			return e, abi.E(abi.Invalid, fmt.Sprintf("temperature %q: want 0 to 2", words[0]))
		}
		e.Temp = &t
	case "set-tool-cap":
		if len(words) != 1 {
			return e, abi.E(abi.Invalid, "usage: set-tool-cap <n>")
		}
		n, err := strconv.ParseInt(words[0], 10, 64)
		if err != nil || n < 0 {
			return e, abi.E(abi.Invalid, fmt.Sprintf("tool cap %q: want a count", words[0]))
		}
		e.N = &n
	default:
		return e, abi.E(abi.Invalid, fmt.Sprintf("unknown effect %q", op))
	}
	return e, nil
}

// directiveArgs is a continue of pid with effect e (none if nil), for the
// checkpoint option of l if given.
func directiveArgs(pid string, l ns.CtlLine, e *abi.Effect) (*abi.DirectiveArgs, error) {
	a := &abi.DirectiveArgs{Pid: pid, Directive: abi.Directive{Type: "continue"}}
	if v, ok := l.LookupOpt("checkpoint"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("checkpoint=%q is not a number", v))
		}
		a.Checkpoint = &n
	}
	if e != nil {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("effect %s: %v", e.Op, err))
		}
		a.Directive.Effects = []json.RawMessage{b}
	}
	return a, nil
}

// freeText is the text of a free-text verb after its leading options.
func freeText(l ns.CtlLine, keys ...string) (string, error) {
	ll, err := splitLead(l.Text(), 0, keys...)
	return ll.text, err
}

// runVerbs are the run verbs of pid's ctl file.
func runVerbs(pid string) map[string]ns.CtlVerb {
	effectVerb := func(op string) ns.CtlVerb {
		return func(l ns.CtlLine) (kernel.Bound, error) {
			if l.JSON != nil {
				return kernel.Bind(abi.ProcDirective, &abi.DirectiveArgs{Pid: pid}), nil
			}
			text := ""
			if op == "refocus" || op == "inject" {
				var err error
				if text, err = freeText(l, "checkpoint", "role"); err != nil {
					return kernel.Bound{}, err
				}
			}
			e, err := effectOf(op, l, l.Words, text)
			if err != nil {
				return kernel.Bound{}, err
			}
			a, err := directiveArgs(pid, l, &e)
			return kernel.Bind(abi.ProcDirective, a), err
		}
	}
	verbs := map[string]ns.CtlVerb{
		"continue": func(l ns.CtlLine) (kernel.Bound, error) {
			if l.JSON != nil {
				return kernel.Bind(abi.ProcDirective, &abi.DirectiveArgs{Pid: pid}), nil
			}
			if len(l.Words) == 0 {
				a, err := directiveArgs(pid, l, nil)
				return kernel.Bind(abi.ProcDirective, a), err
			}
			op := l.Words[0]
			text := ""
			if op == "refocus" || op == "inject" {
				t, err := freeText(l, "checkpoint")
				if err != nil {
					return kernel.Bound{}, err
				}
				ll, err := splitLead(t, 1, "role")
				if err != nil {
					return kernel.Bound{}, err
				}
				text = ll.text
			}
			e, err := effectOf(op, l, l.Words[1:], text)
			if err != nil {
				return kernel.Bound{}, err
			}
			a, err := directiveArgs(pid, l, &e)
			return kernel.Bind(abi.ProcDirective, a), err
		},
		"stop": func(l ns.CtlLine) (kernel.Bound, error) {
			return kernel.Bind(abi.ProcRunControl, &abi.RunControlArgs{Pid: pid, Stop: true, Wait: true}), l.Args(0, 0, "stop")
		},
		"start": func(l ns.CtlLine) (kernel.Bound, error) {
			return kernel.Bind(abi.ProcRunControl, &abi.RunControlArgs{Pid: pid, Start: true}), l.Args(0, 0, "start")
		},
		"supervise": func(l ns.CtlLine) (kernel.Bound, error) {
			if err := l.Args(0, 1, "supervise [grace=<ms|duration>] | supervise off"); err != nil {
				return kernel.Bound{}, err
			}
			if len(l.Words) == 1 && l.Words[0] != "off" {
				return kernel.Bound{}, abi.E(abi.Invalid, "usage: supervise [grace=<ms|duration>] | supervise off")
			}
			on := len(l.Words) == 0
			a := &abi.RunControlArgs{Pid: pid, Supervise: &on}
			if v, ok := l.LookupOpt("grace"); ok {
				n, err := durationMs("grace", v)
				if err != nil {
					return kernel.Bound{}, err
				}
				a.GraceMs = &n
			}
			return kernel.Bind(abi.ProcRunControl, a), nil
		},
		"budget": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.RunControlArgs{Pid: pid, Budget: &abi.RunBudget{}}
			if err := l.Args(0, 0, "budget [usd=..] [tokens=..] [turns=..] [time=..] [on-exhaust=pause|abort]"); err != nil {
				return kernel.Bound{}, err
			}
			if l.JSON == nil {
				if err := budgetOpts(l, a.Budget); err != nil {
					return kernel.Bound{}, err
				}
			}
			return kernel.Bind(abi.ProcRunControl, a), nil
		},
	}
	for _, op := range []string{"extend-budget", "refocus", "swap-model", "set-temperature", "set-tool-cap"} {
		verbs[op] = effectVerb(op)
	}
	return verbs
}

package proc

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/ns"
)

// FuzzRunVerbs: a line of the run verbs of a process's ctl is a 400, or
// args whose check (checkRunControl, applyEffect) either refuses them,
// leaving the settings exactly as they were, or changes the settings to
// values that are finite and can be stored (JSON). NaN, ±Inf and
// overflowing sums never reach the settings.
func FuzzRunVerbs(f *testing.F) {
	for _, s := range []string{
		"budget usd=NaN", "budget usd=0.5 tokens=100 turns=3 time=10m on-exhaust=pause", "budget usd=+Inf",
		"budget usd=-inf", "budget usd=1e400", "budget usd=0x1p3", "set-temperature NaN", "set-temperature 1.5",
		"set-temperature -Inf", "set-temperature 2.0000001", "extend-budget usd=NaN", "extend-budget usd=1e308",
		"extend-budget tokens=9223372036854775807 turns=1", "continue extend-budget usd=Infinity", "continue checkpoint=3",
		"supervise grace=99999h", "supervise grace=5s", "supervise off", "stop", "start", "set-tool-cap 3",
		"swap-model m2", "refocus look again", "continue inject role=user hi", `budget {"budget":{"usd":1}}`,
		"extend-budget dollars=0.5", "extend-budget usd=1 dollars=2", "extend-budget usd=1 dollars=1", "continue extend-budget dollars=NaN",
		`continue {"directive":{"type":"extend-budget","dollars":1,"usd":2}}`, `continue {"directive":{"type":"continue","effects":[{"op":"extend-budget","dollars":1}]}}`,
	} {
		f.Add(s)
	}
	verbs := runVerbs("p_1")
	base := func() *runCtl {
		t := 1.0
		n := int64(5)
		return &runCtl{Budget: abi.RunBudget{USD: 1e308, Tokens: math.MaxInt64 - 1, Turns: 10, TimeMs: 1000}, GraceMs: 10, Temp: &t, ToolCap: &n}
	}
	storable := func(t *testing.T, line string, c *runCtl) {
		t.Helper()
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("%q: the settings cannot be stored: %v", line, err)
		}
		var back runCtl
		if err := json.Unmarshal(b, &back); err != nil || math.IsInf(back.Budget.USD, 0) || back.Budget.Tokens < 0 || back.Budget.TimeMs < 0 {
			t.Fatalf("%q: the settings read back as %s: %v", line, b, err)
		}
	}
	f.Fuzz(func(t *testing.T, line string) {
		l, err := ns.ParseCtl(line)
		if err != nil {
			return
		}
		v, ok := verbs[l.Verb]
		if !ok {
			return
		}
		b, err := v(l)
		call, args := b.Name(), b.Args()
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("%q: an error of kind %v, want a 400: %v", line, abi.KindOf(err), err)
			}
			return
		}
		if l.JSON != nil {
			if err := abi.DecodeArgs(l.JSON, args); err != nil {
				return
			}
		}
		switch a := args.(type) {
		case *abi.RunControlArgs:
			c := base()
			if err := checkRunControl(a); err != nil {
				if abi.KindOf(err) != abi.Invalid {
					t.Fatalf("%q: %v, want a 400", line, err)
				}
				return
			}
			applyRunControl(c, a)
			storable(t, line, c)
		case *abi.DirectiveArgs:
			if _, err := normalizeDirective(a.Directive); err != nil {
				return
			}
			for _, raw := range a.Directive.Effects {
				var e abi.Effect
				if err := json.Unmarshal(raw, &e); err != nil {
					t.Fatalf("%q: effect %s does not decode: %v", line, raw, err)
				}
				c, before := base(), base()
				ok, changed := applyEffect(c, e)
				if !ok || !changed {
					// A refused effect, or one said to change nothing,
					// leaves the settings as they were.
					if !reflect.DeepEqual(c, before) {
						t.Fatalf("%q: an effect (ok %v, changed %v) changed the settings: %+v", line, ok, changed, c)
					}
					continue
				}
				if reflect.DeepEqual(c, before) && e.Op != "inject-message" {
					t.Fatalf("%q: an effect said to change the settings left them as they were", line)
				}
				storable(t, line, c)
			}
		default:
			t.Fatalf("%q: call %s with args %T", line, call, args)
		}
	})
}

package abi

import (
	"math"
	"testing"
)

func TestParsePrices(t *testing.T) {
	cases := []struct {
		text    string
		ok      bool
		prov    string
		model   string
		in, out float64
	}{
		{"# m in out\nopenai/gpt-4o 2.5 10\n", true, "openai", "gpt-4o", 2.5, 10},
		{"gpt-4o $2.5 $10 # list price", true, "openai", "gpt-4o", 2.5, 10},
		{"offline/* 0 0", true, "offline", "anything", 0, 0},
		{"gpt-4o 2.5", false, "", "", 0, 0},
		{"gpt-4o -1 2", false, "", "", 0, 0},
		{"gpt-4o NaN 2", false, "", "", 0, 0},
	}
	for _, c := range cases {
		p, err := ParsePrices(c.text)
		if (err == nil) != c.ok {
			t.Errorf("ParsePrices(%q): %v", c.text, err)
			continue
		}
		if !c.ok {
			continue
		}
		pr, found := p.Lookup(c.prov, c.model)
		if !found || pr.In != c.in || pr.Out != c.out {
			t.Errorf("ParsePrices(%q).Lookup(%s, %s) = %v %v", c.text, c.prov, c.model, pr, found)
		}
	}
	p, _ := ParsePrices("m 1 2")
	if usd, ok := p.Cost(ModelUsage{Model: "m", TokensIn: 1e6, TokensOut: 1e6}); !ok || usd != 3 {
		t.Errorf("cost %v %v", usd, ok)
	}
	if _, ok := p.Cost(ModelUsage{Model: "unknown", TokensIn: 5, Calls: 2, ReportedCalls: 1, ReportedUSD: 1}); ok {
		t.Error("an unknown price was known")
	}
}

// FuzzParsePrices: any text parses to finite, non-negative prices or an
// error, never a panic.
func FuzzParsePrices(f *testing.F) {
	for _, s := range []string{"gpt-4o 2.5 10", "# c\n\noffline/* 0 0", "a 1", "a -1 1", "a 1e309 1", "a $1 $2 #x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrices(s)
		if err != nil {
			return
		}
		for k, pr := range p {
			if pr.In < 0 || pr.Out < 0 || math.IsInf(pr.In, 0) || math.IsNaN(pr.Out) || math.IsInf(pr.Out, 0) {
				t.Fatalf("%q: %v", k, pr)
			}
		}
	})
}

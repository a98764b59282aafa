package abi

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ProcCost is the cost of a process's model calls (/proc/<pid>/cost).
var ProcCost = Call[PidArgs, *CostResult]{Name: "proc.cost", Grant: Users, Flags: Read,
	Doc: "A process's model usage per provider and model, priced from config/ai/prices (cost null and costIncomplete when a price is unknown)."}

// SigProcRunUsage is published after each model call of a run: its
// usage and what it cost (metrics count it by provider and model).
var SigProcRunUsage = Signal[RunUsageSignal]{Name: "proc.run.usage",
	Doc: "A run's model call: the provider, the model, its tokens and its cost."}

// RunUsageSignal is the payload of proc.run.usage. Cost is nil when the
// model's price is unknown.
type RunUsageSignal struct {
	ConversationID string   `json:"conversationId"`
	Pid            string   `json:"pid"`
	RunID          string   `json:"runId"`
	Provider       string   `json:"provider"`
	Model          string   `json:"model"`
	TokensIn       int64    `json:"tokensIn"`
	TokensOut      int64    `json:"tokensOut"`
	Cost           *float64 `json:"cost"`
	DurationMs     int64    `json:"durationMs"`
	// TraceID is the run's trace (kernel.TraceOf of its calls).
	TraceID string `json:"traceId,omitempty"`
}

// SignalScope returns the run's process and conversation.
func (p RunUsageSignal) SignalScope() (string, string) { return p.Pid, p.ConversationID }

// ModelUsage is a process's usage of one provider's model: its calls and
// tokens, and the dollars its provider reported for ReportedCalls of
// them.
type ModelUsage struct {
	Provider      string  `json:"provider"`
	Model         string  `json:"model"`
	Calls         int64   `json:"calls"`
	TokensIn      int64   `json:"tokensIn"`
	TokensOut     int64   `json:"tokensOut"`
	ReportedUSD   float64 `json:"reportedUsd,omitempty"`
	ReportedCalls int64   `json:"reportedCalls,omitempty"`
}

// ModelCost is one model's line of a CostResult: its usage and its cost
// in dollars, nil when no price is known for it.
type ModelCost struct {
	ModelUsage
	Cost *float64 `json:"cost"`
}

// CostResult is proc.cost's answer: per model, and the totals. Cost is
// nil and CostIncomplete true when a model's price is unknown: an
// unknown price never counts as zero.
type CostResult struct {
	Pid            string      `json:"pid"`
	Models         []ModelCost `json:"models"`
	TokensIn       int64       `json:"tokensIn"`
	TokensOut      int64       `json:"tokensOut"`
	Cost           *float64    `json:"cost"`
	CostIncomplete bool        `json:"costIncomplete"`
}

// Price is a model's price in dollars per million tokens in and out.
type Price struct {
	In, Out float64
}

// Prices is the table of config/ai/prices: by "provider/model", by
// "model" alone, or by "provider/*" (every model of a provider).
type Prices map[string]Price

// maxPriceLines bounds a prices table.
const maxPriceLines = 10000

// ParsePrices reads a prices table: one model a line, "NAME IN OUT",
// NAME a model ("gpt-4o"), a provider's model ("openai/gpt-4o") or a
// provider's every model ("offline/*"), IN and OUT dollars per million
// tokens (finite, not negative); blank lines and # comments are skipped.
// A malformed line is an error naming it.
func ParsePrices(text string) (Prices, error) {
	p := Prices{}
	for i, line := range strings.Split(text, "\n") {
		if i >= maxPriceLines {
			return nil, fmt.Errorf("prices: over %d lines", maxPriceLines)
		}
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("prices line %d: want NAME IN OUT (dollars per million tokens), got %q", i+1, strings.TrimSpace(line))
		}
		var pr [2]float64
		for k, s := range f[1:] {
			v, err := strconv.ParseFloat(strings.TrimPrefix(s, "$"), 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("prices line %d: %q is not a price (dollars per million tokens, 0 or more)", i+1, s)
			}
			pr[k] = v
		}
		p[f[0]] = Price{In: pr[0], Out: pr[1]}
	}
	return p, nil
}

// Lookup returns the price of provider's model: "provider/model", then
// "model", then "provider/*".
func (p Prices) Lookup(provider, model string) (Price, bool) {
	for _, k := range []string{provider + "/" + model, model, provider + "/*"} {
		if pr, ok := p[k]; ok {
			return pr, true
		}
	}
	return Price{}, false
}

// Cost prices u: the table's price when it has one, else the dollars the
// provider reported when it reported them for every call; ok is false
// when neither is known (never a zero cost).
func (p Prices) Cost(u ModelUsage) (usd float64, ok bool) {
	if pr, found := p.Lookup(u.Provider, u.Model); found {
		return (float64(u.TokensIn)*pr.In + float64(u.TokensOut)*pr.Out) / 1e6, true
	}
	if u.ReportedCalls > 0 && u.ReportedCalls >= u.Calls {
		return u.ReportedUSD, true
	}
	return 0, false
}

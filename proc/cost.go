package proc

import (
	"context"
	"slices"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// pricesKey is the config key of the prices table (abi.ParsePrices).
const pricesKey = "config/ai/prices"

// prices reads the prices table; a missing or malformed one prices
// nothing (the kernel refuses a malformed table when it is set).
func (m *engine) prices(ctx context.Context) abi.Prices {
	r, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.SysConfigGet, &abi.ConfigGetArgs{Key: pricesKey})
	if err != nil {
		return nil
	}
	for _, e := range r.Entries {
		if e.Key == pricesKey {
			p, err := abi.ParsePrices(e.Value)
			if err == nil {
				return p
			}
		}
	}
	return nil
}

// modelCall is one model call's usage, as account records it.
type modelCall struct {
	provider, model string
	in, out         int64
	reportedUSD     float64
	took            time.Duration
}

// priceCall prices a model call: its cost by the table or the
// provider's report (the budget's dollars), and whether it is known.
func (m *engine) priceCall(ctx context.Context, mc modelCall) (float64, bool) {
	u := abi.ModelUsage{Provider: mc.provider, Model: mc.model, Calls: 1, TokensIn: mc.in, TokensOut: mc.out, ReportedUSD: mc.reportedUSD}
	if mc.reportedUSD > 0 {
		u.ReportedCalls = 1
	}
	return m.prices(ctx).Cost(u)
}

// addModelUsage adds a call to the per-model usage of the settings c.
func addModelUsage(c *runCtl, mc modelCall) {
	i := slices.IndexFunc(c.Models, func(u abi.ModelUsage) bool { return u.Provider == mc.provider && u.Model == mc.model })
	if i < 0 {
		c.Models = append(c.Models, abi.ModelUsage{Provider: mc.provider, Model: mc.model})
		i = len(c.Models) - 1
	}
	u := &c.Models[i]
	u.Calls++
	u.TokensIn += mc.in
	u.TokensOut += mc.out
	if mc.reportedUSD > 0 {
		u.ReportedUSD += mc.reportedUSD
		u.ReportedCalls++
	}
}

// sysCost serves proc.cost: the process's usage per model, priced now.
func (m *engine) sysCost(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (*abi.CostResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	models := slices.Clone(m.controlLocked(ctx, pr).Models)
	pr.mu.Unlock()
	prices := m.prices(ctx)
	res := &abi.CostResult{Pid: p.Pid, Models: []abi.ModelCost{}}
	total := 0.0
	for _, u := range models {
		mc := abi.ModelCost{ModelUsage: u}
		if usd, ok := prices.Cost(u); ok {
			mc.Cost = &usd
			total += usd
		} else {
			res.CostIncomplete = true
		}
		res.TokensIn += u.TokensIn
		res.TokensOut += u.TokensOut
		res.Models = append(res.Models, mc)
	}
	slices.SortFunc(res.Models, func(x, y abi.ModelCost) int {
		return strings.Compare(x.Provider+"/"+x.Model, y.Provider+"/"+y.Model)
	})
	if !res.CostIncomplete {
		res.Cost = &total
	}
	return res, nil
}

// runTrace is the kernel trace of a run started from a queued event
// whose trace id is t: t when it is a kernel trace id (32 hex digits),
// else "" (the run starts a trace of its own).
func runTrace(t string) string {
	if len(t) != 32 || strings.Trim(t, "0123456789abcdef") != "" {
		return ""
	}
	return t
}

// A run's summary, its approval card (proc.hil) and its checkpoint card
// (proc.directive).
import { h, fmtJSON, errorBox } from "./dom.js";

export function runSummary(r) {
  const u = r.used || {};
  const b = r.budget || {};
  const budget = [b.usd ? `$${b.usd}` : null, b.tokens ? `${b.tokens} tok` : null, b.turns ? `${b.turns} turns` : null].filter(Boolean).join(", ");
  return h("div", { class: "run muted" },
    `run ${r.runId || "—"} · ${r.state} · step ${r.step || 0} · $${(u.usd || 0).toFixed(4)} · ${u.tokensIn || 0}/${u.tokensOut || 0} tokens`,
    budget ? ` · budget ${budget}` : "");
}

// approvalCard answers a pending tool call: approve, deny, approve with
// edited args, or substitute a result.
export function approvalCard(conn, pid, req, done) {
  const args = h("textarea", { class: "args", rows: 4, spellcheck: "false" });
  args.value = JSON.stringify(req.args, null, 2);
  const result = h("textarea", { class: "result", rows: 2, placeholder: "result the model gets instead" });
  const status = h("div", {});
  const answer = async (decision, extra = {}) => {
    try {
      await conn.call("proc.hil", { pid, requestId: req.requestId, decision, argsDigest: req.argsDigest, ...extra });
      if (done) await done();
    } catch (e) {
      status.replaceChildren(errorBox(e));
    }
  };
  return h("div", { class: "card approval", "data-request": req.requestId },
    h("div", { class: "title" }, `Approve ${req.toolName}?`),
    h("div", { class: "muted" }, `${req.syscall}${req.target ? " on " + req.target : ""}`),
    h("pre", { class: "tool" }, fmtJSON(req.args)),
    h("div", { class: "row" },
      h("button", { class: "approve", onclick: () => answer("approve") }, "Approve"),
      h("button", { class: "deny danger", onclick: () => answer("deny") }, "Deny")),
    h("details", {}, h("summary", {}, "Edit arguments"), args,
      h("button", { class: "secondary", onclick: () => {
        let parsed;
        try { parsed = JSON.parse(args.value); } catch (e) { status.replaceChildren(errorBox(e)); return; }
        answer("approve", { args: parsed });
      } }, "Approve edited")),
    h("details", {}, h("summary", {}, "Substitute a result"), result,
      h("button", { class: "secondary", onclick: () => answer("substitute", { result: result.value }) }, "Substitute")),
    status);
}

// checkpointCard decides a parked run's checkpoint: continue, refocus
// with a hint, extend the budget, or stop.
export function checkpointCard(conn, pid, cp, done) {
  const hint = h("input", { class: "hint", placeholder: "refocus hint" });
  const usd = h("input", { class: "usd", type: "number", step: "0.01", min: "0", placeholder: "USD" });
  const status = h("div", {});
  const direct = async (directive) => {
    try {
      await conn.call("proc.directive", { pid, checkpoint: cp.seq, directive });
      if (done) await done();
    } catch (e) {
      status.replaceChildren(errorBox(e));
    }
  };
  const s = cp.snapshot || {};
  return h("div", { class: "card checkpoint", "data-seq": cp.seq },
    h("div", { class: "title" }, `Checkpoint ${cp.seq}: ${cp.reason}`),
    h("div", { class: "muted" }, `${s.description || ""} · ${s.steps || 0} steps · ${s.toolCalls || 0} tool calls · $${(s.costUsd || 0).toFixed(4)}`),
    h("div", { class: "row" },
      h("button", { class: "continue", onclick: () => direct({ type: "continue" }) }, "Continue"),
      h("button", { class: "stop danger", onclick: () => direct({ type: "abort", reason: "stopped from the web console" }) }, "Stop")),
    h("div", { class: "row" }, hint, h("button", { class: "refocus secondary", onclick: () => direct({ type: "refocus", hint: hint.value }) }, "Refocus")),
    h("div", { class: "row" }, usd, h("button", { class: "extend secondary", onclick: () => direct({ type: "extend-budget", usd: Number(usd.value) || 0 }) }, "Extend budget")),
    status);
}

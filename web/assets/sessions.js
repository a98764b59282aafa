// The exec sessions page: the user's sessions (process.session.list), a
// command run in one (process.exec), and its signals
// (process.session.signal).
import { h, clear, errorBox } from "./dom.js";

function outText(o) {
  if (!o) return "";
  if (o.inline_text) return o.inline_text.text;
  if (o.inline_bytes) return "[binary output]";
  return JSON.stringify(o);
}

export async function sessionsPage(conn, main, arg) {
  const list = h("div", { id: "sessions" });
  main.append(h("h2", {}, "Exec sessions"), list);
  const r = await conn.call("process.session.list", {});
  if (!r.sessions.length) list.append(h("p", { class: "muted" }, "No exec sessions (open one with gsv session open)."));
  for (const s of r.sessions) {
    list.append(h("a", { class: "card session", href: `#/sessions/${encodeURIComponent(s.session_id)}` },
      h("div", { class: "title" }, s.session_id),
      h("div", { class: "muted" }, `${s.state} · ${s.workdir} · network ${s.network}${s.device ? " · on " + s.device : ""}${s.running && s.running.length ? " · running " + s.running.length : ""}`)));
  }
  if (!arg) return;
  const input = h("input", { class: "command", placeholder: "argv, split at spaces" });
  const out = h("pre", { class: "output" });
  const form = h("form", { class: "row" }, input, h("button", { type: "submit" }, "Exec"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    out.textContent = "…";
    try {
      const x = await conn.call("process.exec", { session_id: arg, argv: input.value.trim().split(/\s+/) });
      out.textContent = `${outText(x.stdout)}${outText(x.stderr)}\n[${x.status} ${x.exit_code}]${x.error ? " " + x.error : ""}`;
    } catch (e) {
      out.textContent = `${e.code || ""} ${e.message}`;
    }
  });
  const status = h("div", {});
  const signal = (sig) => conn.call("process.session.signal", { session_id: arg, signal: sig })
    .then((x) => status.replaceChildren(h("p", { class: "muted" }, `${sig}: ${x.status}`)))
    .catch((e) => status.replaceChildren(errorBox(e)));
  main.append(h("h3", {}, arg), form, out,
    h("div", { class: "row" }, h("button", { class: "secondary", onclick: () => signal("term") }, "Terminate"),
      h("button", { class: "danger", onclick: () => signal("kill") }, "Kill")), status);
}

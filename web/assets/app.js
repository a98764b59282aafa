// The web console: every page is made of syscalls as the signed-in user,
// over one WebSocket connection (gsv.js). No page writes HTML from data:
// text goes in with textContent only.
import { Connection, ProtocolError, signIn, signOut } from "./gsv.js";
import { h, clear, when, fmtTime, fmtJSON, errorBox } from "./dom.js";
import { approvalCard, checkpointCard, runSummary } from "./runs.js";
import { filesPage, devicesPage } from "./files.js";
import { sessionsPage } from "./sessions.js";

const app = document.getElementById("app");
let conn = null;
let unlisten = [];

function listen(fn) {
  unlisten.push(conn.on(fn));
}

const pages = {
  procs: { title: "Processes", render: procsPage },
  proc: { title: "Chat", render: chatPage, hidden: true },
  approvals: { title: "Approvals", render: approvalsPage },
  notifications: { title: "Notifications", render: notificationsPage },
  schedules: { title: "Schedules", render: schedulesPage },
  devices: { title: "Devices", render: (main, arg) => devicesPage(conn, main, arg) },
  files: { title: "Files", render: (main, arg) => filesPage(conn, main, arg) },
  sessions: { title: "Sessions", render: (main, arg) => sessionsPage(conn, main, arg) },
};

async function start() {
  if (location.pathname === "/login") {
    const code = location.hash.slice(1);
    history.replaceState(null, "", "/");
    if (code) {
      try {
        await signIn({ code });
      } catch (e) {
        return loginPage(`Sign-in failed: ${e.message}`);
      }
    }
  }
  conn = new Connection();
  try {
    await conn.open();
  } catch (e) {
    if (e instanceof ProtocolError && (e.code === 401 || e.code === 425)) return loginPage(e.code === 425 ? e.message : "");
    return loginPage(`Cannot connect: ${e.message}`);
  }
  conn.onclose = (ev) => {
    const banner = h("div", { class: "banner error", id: "closed" }, `Disconnected (${ev.code}${ev.reason ? ": " + ev.reason : ""}). `,
      h("a", { href: "/" }, "Reconnect"));
    document.body.prepend(banner);
  };
  window.addEventListener("hashchange", route);
  route();
}

function loginPage(msg) {
  clear(app);
  const token = h("input", { type: "password", id: "token", placeholder: "gsv_user_…", autocomplete: "off" });
  const form = h("form", { class: "card login" },
    h("h1", {}, "gsv"),
    msg ? h("p", { class: "error" }, msg) : null,
    h("p", { class: "muted" }, "Open a link from ", h("code", {}, "gsv login-link"), ", or paste a user token:"),
    token,
    h("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await signIn({ token: token.value.trim() });
      location.replace("/");
    } catch (e) {
      loginPage(`Sign-in failed: ${e.message}`);
    }
  });
  app.append(form);
}

function route() {
  for (const f of unlisten) f();
  unlisten = [];
  const [name, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  const page = pages[name] ? name : "procs";
  const arg = rest.map(decodeURIComponent).join("/");
  clear(app);
  const nav = h("nav", {},
    h("span", { class: "brand" }, "gsv"),
    ...Object.entries(pages).filter(([, p]) => !p.hidden).map(([k, p]) =>
      h("a", { href: `#/${k}`, class: k === page ? "active" : "" }, p.title)),
    h("span", { class: "who" }, conn.identity ? conn.identity.username : ""),
    h("button", { class: "link", onclick: async () => { await signOut(); location.replace("/"); } }, "Sign out"));
  const main = h("main", { id: `page-${page}` });
  app.append(nav, main);
  Promise.resolve(pages[page].render(main, arg)).catch((e) => main.append(errorBox(e)));
}

// procsPage lists the user's processes (proc.list) with their runs
// (proc.run.list), and spawns one (proc.spawn).
async function procsPage(main) {
  const list = h("div", { id: "procs" });
  const profiles = await conn.call("proc.profile.list", {}).catch(() => ({ profiles: [] }));
  const profile = h("select", { id: "spawn-profile" },
    ...profiles.profiles.filter((p) => p.startable !== false).map((p) => h("option", { value: p.id }, p.displayName || p.id)));
  const label = h("input", { id: "spawn-label", placeholder: "label" });
  const form = h("form", { class: "row" }, profile, label, h("button", { type: "submit" }, "Spawn"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const r = await conn.call("proc.spawn", { profile: profile.value || "task", label: label.value });
      location.hash = `#/proc/${encodeURIComponent(r.pid)}`;
    } catch (e) {
      form.after(errorBox(e));
    }
  });
  main.append(h("h2", {}, "Processes"), form, list);
  const load = async () => {
    const [ps, runs] = await Promise.all([conn.call("proc.list", {}), conn.call("proc.run.list", {}).catch(() => ({ runs: [] }))]);
    const byPid = new Map(runs.runs.map((r) => [r.pid, r]));
    clear(list);
    if (!ps.processes.length) list.append(h("p", { class: "muted" }, "No processes."));
    for (const p of ps.processes) {
      const run = byPid.get(p.pid);
      list.append(h("a", { class: "card proc", href: `#/proc/${encodeURIComponent(p.pid)}`, "data-pid": p.pid },
        h("div", { class: "title" }, p.label || p.pid),
        h("div", { class: "muted" }, `${p.profile} · ${p.pid} · ${p.state}${run ? " · run " + run.state : ""}`),
        run ? runSummary(run) : null));
    }
  };
  await load();
  // The list's first paint, for the console's speed figure (docs/web.md).
  if (!performance.getEntriesByName("gsv:procs-rendered").length) performance.mark("gsv:procs-rendered");
  listen((sig) => {
    if (sig === "proc.changed" || sig === "process.lifecycle" || sig === "proc.run.finished" || sig === "proc.run.started") load();
  });
}

// messageView renders one stored message.
function messageView(m) {
  let text = "";
  const extra = [];
  const c = m.content;
  if (typeof c === "string") text = c;
  else if (c && typeof c === "object") {
    if (m.role === "assistant") {
      text = c.text || "";
      for (const tc of c.toolCalls || []) extra.push(h("pre", { class: "tool" }, `→ ${tc.name} ${fmtJSON(tc.args)}`));
    } else if (m.role === "toolResult") {
      text = `${c.toolName}: ${c.output}`;
    } else text = fmtJSON(c);
  }
  return h("div", { class: `msg ${m.role}` }, h("div", { class: "role" }, m.role), h("div", { class: "text" }, text), ...extra);
}

// chatPage is a process's conversation (proc.history), its replies
// streamed (proc.run.stream), its pending approval or checkpoint
// (proc.run.get), and a box to send a message (proc.send).
async function chatPage(main, pid) {
  const log = h("div", { class: "chat", id: "chat" });
  const controls = h("div", { id: "run-controls" });
  const input = h("textarea", { id: "chat-input", rows: 2, placeholder: "Message" });
  const form = h("form", { class: "send" }, input, h("button", { type: "submit", id: "chat-send" }, "Send"),
    h("button", { type: "button", class: "secondary", onclick: () => conn.call("proc.abort", { pid }).catch((e) => form.after(errorBox(e))) }, "Stop"));
  main.append(h("h2", {}, h("a", { href: "#/procs" }, "Processes"), " / ", pid), controls, log, form);
  let live = null;
  let scrolling = false;
  const load = async () => {
    const hist = await conn.call("proc.history", { pid, limit: 200, offset: 0 });
    clear(log);
    for (const m of hist.messages) log.append(messageView(m));
    live = null;
    log.scrollTop = log.scrollHeight;
  };
  let runGen = 0;
  const loadRun = async () => {
    const gen = ++runGen;
    const run = await conn.call("proc.run.get", { pid }).catch(() => null);
    if (gen !== runGen) return; // a later load answers
    const parts = [];
    if (run && run.runId) parts.push(runSummary(run));
    if (run && run.hil) parts.push(approvalCard(conn, pid, run.hil, loadRun));
    if (run && run.pending) parts.push(checkpointCard(conn, pid, run.pending, loadRun));
    controls.replaceChildren(...parts);
  };
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const message = input.value;
    if (!message.trim()) return;
    input.value = "";
    log.append(messageView({ role: "user", content: message }));
    try {
      await conn.call("proc.send", { pid, message });
    } catch (e) {
      log.append(errorBox(e));
    }
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  listen((sig, p) => {
    if (!p || p.pid !== pid) return;
    if (sig === "proc.run.stream") {
      if (!live) {
        live = h("div", { class: "text" });
        log.append(h("div", { class: "msg assistant streaming", id: "streaming" }, h("div", { class: "role" }, "assistant"), live));
      }
      // A piece is a text node of its own (no copy of the text so far)
      // and the log scrolls once a frame: reading scrollHeight on each
      // piece laid the page out once a piece, and a burst of pieces
      // queued behind those layouts (docs/web.md, Speed).
      live.append(p.text);
      if (!scrolling) {
        scrolling = true;
        requestAnimationFrame(() => {
          scrolling = false;
          log.scrollTop = log.scrollHeight;
        });
      }
    } else if (sig === "proc.run.finished") {
      load().then(loadRun);
    } else if (sig.startsWith("proc.run.")) {
      loadRun();
    }
  });
  await load();
  await loadRun();
}

// approvalsPage is every run waiting for a human: its approval
// request or its checkpoint (proc.run.list).
async function approvalsPage(main) {
  const list = h("div", { id: "approvals" });
  main.append(h("h2", {}, "Approvals and checkpoints"), list);
  const load = async () => {
    const runs = await conn.call("proc.run.list", {});
    clear(list);
    const waiting = runs.runs.filter((r) => r.hil || r.pending);
    if (!waiting.length) list.append(h("p", { class: "muted" }, "Nothing waits for you."));
    for (const r of waiting) {
      list.append(h("div", { class: "group" },
        h("a", { href: `#/proc/${encodeURIComponent(r.pid)}` }, r.pid), runSummary(r),
        r.hil ? approvalCard(conn, r.pid, r.hil, load) : null,
        r.pending ? checkpointCard(conn, r.pid, r.pending, load) : null));
    }
  };
  await load();
  listen((sig) => {
    if (sig.startsWith("proc.run.")) load();
  });
}

// notificationsPage lists the user's notifications (notification.list)
// and marks them read or dismisses them.
async function notificationsPage(main) {
  const list = h("div", { id: "notifications" });
  main.append(h("h2", {}, "Notifications"), list);
  const load = async () => {
    const r = await conn.call("notification.list", { includeRead: true });
    clear(list);
    if (!r.notifications.length) list.append(h("p", { class: "muted" }, "No notifications."));
    for (const n of r.notifications) {
      const id = n.notificationId;
      list.append(h("div", { class: `card note ${n.level} ${n.readAt ? "read" : "unread"}` },
        h("div", { class: "title" }, n.title),
        n.body ? h("div", {}, n.body) : null,
        h("div", { class: "muted" }, fmtTime(n.createdAt)),
        h("div", { class: "row" },
          n.readAt ? null : h("button", { class: "secondary", onclick: () => conn.call("notification.mark_read", { notificationId: id }).then(load) }, "Mark read"),
          h("button", { class: "secondary", onclick: () => conn.call("notification.dismiss", { notificationId: id }).then(load) }, "Dismiss"))));
    }
  };
  await load();
  listen((sig) => {
    if (sig.startsWith("notification.")) load();
  });
}

// schedulesPage edits the crontab (sched.crontab.get, .set: a bad line's
// error shown under it) and lists the schedules with their next fire
// times and last errors (sched.list).
async function schedulesPage(main) {
  const text = h("textarea", { id: "crontab", rows: 8, spellcheck: "false" });
  const status = h("div", { id: "crontab-status" });
  const table = h("div", { id: "schedules" });
  const save = h("button", { id: "crontab-save" }, "Save crontab");
  main.append(h("h2", {}, "Schedules"), h("p", { class: "muted" }, "Your crontab: one schedule a line (", h("code", {}, "*/5 * * * * message"), ")."),
    text, h("div", { class: "row" }, save), status, h("h3", {}, "Schedules"), table);
  const load = async () => {
    const r = await conn.call("sched.list", { includeDisabled: true });
    clear(table);
    if (!r.schedules.length) table.append(h("p", { class: "muted" }, "No schedules."));
    for (const s of r.schedules) {
      const st = s.state || {};
      table.append(h("div", { class: "card sched" },
        h("div", { class: "title" }, s.name),
        h("div", { class: "muted" }, `${fmtJSON(s.expression)}${s.enabled ? "" : " · disabled"}`),
        h("div", {}, `next: ${st.nextRunAtMs ? fmtTime(st.nextRunAtMs) : "—"} · runs: ${st.runCount || 0}${st.lastStatus ? " · last: " + st.lastStatus : ""}`),
        st.lastError ? h("div", { class: "error" }, st.lastError) : null));
    }
  };
  text.value = (await conn.call("sched.crontab.get", {})).text;
  save.addEventListener("click", async () => {
    clear(status);
    try {
      const r = await conn.call("sched.crontab.set", { text: text.value });
      status.append(h("p", { class: "ok" }, `Saved: ${r.added.length} added, ${r.updated.length} updated, ${r.removed.length} removed.`));
      await load();
    } catch (e) {
      status.append(errorBox(e));
    }
  });
  await load();
  listen((sig) => {
    if (sig.startsWith("sched.")) load();
  });
}

when(start);

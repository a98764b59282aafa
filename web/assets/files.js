// The file browser and editor over the namespace (fs.read, fs.write) and
// the devices page: each device's files (fs.* with target) and a command
// box (shell.exec with target).
import { h, clear, errorBox, fmtTime } from "./dom.js";

// browser is a file browser at path on target ("" : the namespace).
function browser(conn, target, start, onPath) {
  const box = h("div", { class: "browser" });
  const pathInput = h("input", { class: "path", value: start });
  const view = h("div", { class: "view" });
  const open = async (path) => {
    pathInput.value = path;
    if (onPath) onPath(path);
    clear(view);
    const args = { path, raw: true };
    if (target) args.target = target;
    let r;
    try {
      r = await conn.call("fs.read", args);
    } catch (e) {
      view.append(errorBox(e));
      return;
    }
    if (r.ok === false) {
      view.append(errorBox(r.error));
      return;
    }
    if (r.directories || r.files) {
      const up = path.replace(/\/[^/]*\/?$/, "") || (path.startsWith(".") ? "." : "/");
      const ul = h("ul", { class: "listing" });
      if (path !== "/" && path !== ".") ul.append(h("li", {}, h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); open(up); } }, "..")));
      for (const d of r.directories || []) ul.append(h("li", { class: "dir" }, h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); open(join(path, d)); } }, d.replace(/\/$/, "") + "/")));
      for (const f of r.files || []) ul.append(h("li", { class: "file" }, h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); open(join(path, f)); } }, f)));
      view.append(ul);
      return;
    }
    const text = h("textarea", { class: "editor", rows: 20, spellcheck: "false" });
    text.value = r.content || "";
    const status = h("div", {});
    const save = h("button", { class: "save", onclick: async () => {
      const wargs = { path };
      if (target) wargs.target = target;
      try {
        const w = await conn.call("fs.write", wargs, { field: "content", text: text.value });
        status.replaceChildren(w.ok === false ? errorBox(w.error) : h("p", { class: "ok" }, `Saved ${w.size} bytes.`));
      } catch (e) {
        status.replaceChildren(errorBox(e));
      }
    } }, "Save");
    view.append(h("div", { class: "muted" }, `${r.size || 0} bytes`), text, h("div", { class: "row" }, save), status);
  };
  pathInput.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") open(pathInput.value);
  });
  box.append(h("div", { class: "row" }, pathInput, h("button", { onclick: () => open(pathInput.value) }, "Open")), view);
  open(start);
  return box;
}

function join(dir, name) {
  return (dir.endsWith("/") ? dir : dir + "/") + name.replace(/\/$/, "");
}

export async function filesPage(conn, main, arg) {
  const start = arg ? "/" + arg.replace(/^\//, "") : conn.identity.home || "/";
  main.append(h("h2", {}, "Files"), browser(conn, "", start, (p) => history.replaceState(null, "", `#/files${p}`)));
}

// shellBox runs commands on target (shell.exec).
function shellBox(conn, target) {
  const input = h("input", { class: "command", placeholder: "command" });
  const out = h("pre", { class: "output" });
  const form = h("form", { class: "row" }, input, h("button", { type: "submit" }, "Run"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    out.textContent = "…";
    try {
      const r = await conn.call("shell.exec", { target, input: input.value });
      out.textContent = (r.output || r.error || "") + (r.exitCode !== undefined ? `\n[exit ${r.exitCode}]` : `\n[${r.status}]`);
    } catch (e) {
      out.textContent = `${e.code || ""} ${e.message}`;
    }
  });
  return h("div", { class: "shell" }, form, out);
}

export async function devicesPage(conn, main, arg) {
  main.append(h("h2", {}, "Devices"));
  const r = await conn.call("sys.device.list", { includeOffline: true });
  const list = h("div", { id: "devices" });
  if (!r.devices.length) list.append(h("p", { class: "muted" }, "No devices."));
  for (const d of r.devices) {
    list.append(h("a", { class: `card device ${d.online ? "online" : "offline"}`, href: `#/devices/${encodeURIComponent(d.deviceId)}` },
      h("div", { class: "title" }, d.deviceId),
      h("div", { class: "muted" }, `${d.online ? "online" : "offline"} · ${d.platform} · seen ${fmtTime(d.lastSeenAt)}`),
      d.description ? h("div", {}, d.description) : null));
  }
  main.append(list);
  if (arg) {
    // A device's paths are relative to its export ("." is its root).
    main.append(h("h3", {}, `${arg}: files`), browser(conn, arg, ".", null), h("h3", {}, `${arg}: command`), shellBox(conn, arg));
  }
}

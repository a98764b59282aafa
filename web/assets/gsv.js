// The WebSocket protocol's client (docs/web.md): sys.connect, then req/res
// frames matched by id, sig frames handed to the listeners.

export class ProtocolError extends Error {
  constructor(code, message, next) {
    super(message);
    this.code = code;
    this.next = next;
  }
}

export class Connection {
  constructor() {
    this.seq = 0;
    this.pending = new Map();
    this.listeners = new Set();
    this.onclose = null;
    this.identity = null;
  }

  // open connects to /ws and makes sys.connect with the session cookie
  // (or token, when given); it resolves to sys.connect's result.
  async open(token) {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    this.ws = new WebSocket(`${scheme}//${location.host}/ws`);
    this.ws.binaryType = "arraybuffer";
    await new Promise((resolve, reject) => {
      this.ws.onopen = resolve;
      this.ws.onerror = () => reject(new ProtocolError(0, "cannot reach the server"));
    });
    this.ws.onmessage = (ev) => this.receive(ev.data);
    this.ws.onclose = (ev) => {
      for (const p of this.pending.values()) p.reject(new ProtocolError(0, `connection closed (${ev.code} ${ev.reason})`));
      this.pending.clear();
      if (this.onclose) this.onclose(ev);
    };
    const args = {
      protocol: 2,
      client: { id: clientId(), version: "web-1", platform: "browser", role: "user" },
    };
    if (token) args.auth = { username: "", token };
    const res = await this.call("sys.connect", args);
    this.identity = res.identity;
    return res;
  }

  close() {
    if (this.ws) this.ws.close(1000, "bye");
  }

  receive(data) {
    if (typeof data !== "string") return;
    let f;
    try {
      f = JSON.parse(data);
    } catch {
      return;
    }
    if (f.type === "res") {
      const p = this.pending.get(f.id);
      if (!p) return;
      this.pending.delete(f.id);
      if (f.ok) p.resolve(f.data);
      else p.reject(new ProtocolError(f.error.code, f.error.message, f.error.next));
    } else if (f.type === "sig") {
      for (const l of this.listeners) {
        try {
          l(f.signal, f.payload);
        } catch (e) {
          console.error(e);
        }
      }
    }
  }

  // call makes a syscall and resolves to its result. With body, the
  // args field named by body.field is sent as a binary body frame.
  call(name, args = {}, body) {
    const id = `c${++this.seq}`;
    const frame = { type: "req", id, call: name, args };
    if (body) frame.body = body.field;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify(frame));
      if (body) this.ws.send(new TextEncoder().encode(body.text));
    });
  }

  // on adds a signal listener; the function returned removes it.
  on(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}

// clientId is this tab's client id: a newer connection of the same id
// replaces an older one (a reload).
function clientId() {
  let id = sessionStorage.getItem("gsv-client");
  if (!id) {
    id = "web-" + Math.random().toString(36).slice(2, 10);
    sessionStorage.setItem("gsv-client", id);
  }
  return id;
}

// signIn exchanges a one-time code or a token for the session cookie.
export async function signIn(what) {
  const r = await fetch("/api/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(what),
    credentials: "same-origin",
  });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

export async function signOut() {
  await fetch("/api/logout", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}", credentials: "same-origin" });
}

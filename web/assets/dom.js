// DOM helpers: elements are built with text nodes only, never HTML.

// h makes an element: attrs are attributes, except on* (listeners);
// children are nodes or strings (text); null children are skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
}

export function when(fn) {
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fn);
  else fn();
}

export function fmtTime(ms) {
  if (!ms) return "—";
  return new Date(ms).toLocaleString();
}

export function fmtJSON(v) {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

export function errorBox(e) {
  return h("div", { class: "error" }, e && e.code ? `${e.code}: ${e.message}` : String(e && e.message ? e.message : e));
}

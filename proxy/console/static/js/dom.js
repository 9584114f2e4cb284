// Building the page from data without ever parsing data as HTML: every string a
// tool, a model or a user wrote goes in as a text node.

const SVG = "http://www.w3.org/2000/svg";

function fill(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") el.textContent = String(value);
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: h("a", {href: "#/x", class: "link"}, "text", child, …). */
export function h(tag, attrs = {}, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element, as h. */
export function s(tag, attrs = {}, ...children) {
  return fill(document.createElementNS(SVG, tag), attrs, children);
}

export function show(main, ...children) {
  main.replaceChildren(...children.flat().filter(Boolean));
}

export function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

export function seconds(value) {
  if (value === null || value === undefined) return "–";
  return value < 1 ? `${(value * 1000).toFixed(0)} ms` : `${value.toFixed(2)} s`;
}

export function when(epochSeconds) {
  if (!epochSeconds) return "–";
  return new Date(epochSeconds * 1000).toLocaleString();
}

export function errorBox(error) {
  return h("p", { class: "error", role: "alert" }, error.message || String(error));
}

/** A <pre> for a JSON value, folded when long. */
export function codeBlock(value, label) {
  const text = json(value);
  const pre = h("pre", { class: "code" }, text ?? "null");
  if (!label) return pre;
  return h("details", { class: "block" }, h("summary", {}, label), pre);
}

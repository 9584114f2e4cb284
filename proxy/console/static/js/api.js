// The proxy's JSON API, with the key the person typed in once. The key lives in
// sessionStorage (this tab only, gone when it closes) and goes out as a bearer
// header on every fetch; the page itself holds no data and needs no key.

const KEY = "toolgraph.key";
const ADMIN = "toolgraph.admin-key";
const SIGNED_IN = "toolgraph.signed-in"; // the proxy took this tab's key (or needs none)
export const PLAYGROUND = "toolgraph.playground"; // the playground's chat (playground.js)

export const keys = {
  get master() { return sessionStorage.getItem(KEY) || ""; },
  set master(value) { store(KEY, value); },
  get admin() { return sessionStorage.getItem(ADMIN) || ""; },
  set admin(value) { store(ADMIN, value); },
  get signedIn() { return sessionStorage.getItem(SIGNED_IN) === "1"; },
  set signedIn(value) { store(SIGNED_IN, value ? "1" : ""); },
  forget() { for (const name of [KEY, ADMIN, SIGNED_IN, PLAYGROUND]) sessionStorage.removeItem(name); },
};

function store(name, value) {
  if (value) sessionStorage.setItem(name, value);
  else sessionStorage.removeItem(name);
}

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

function headers(admin, extra = {}) {
  const key = admin ? keys.admin : keys.master;
  return key ? { ...extra, authorization: `Bearer ${key}` } : extra;
}

async function failure(response) {
  let body = null;
  try { body = await response.json(); } catch { /* not JSON */ }
  const message = body?.error?.message || `${response.status} ${response.statusText}`;
  return new ApiError(response.status, message, body);
}

/** GET (or, with a body, POST) ``path``; the JSON answer, or an ApiError. */
export async function api(path, { query, body, admin = false, signal, method } = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== "" && value !== null && value !== undefined) url.searchParams.set(name, value);
  }
  const init = { method: method || (body === undefined ? "GET" : "POST"), signal };
  init.headers = headers(admin, body === undefined ? {} : { "content-type": "application/json" });
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(url, init);
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** POST ``body`` and read the server-sent events; ``onEvent`` gets each parsed data
 * object. Resolves to the response (for its headers) when the stream ends. */
export async function stream(path, body, onEvent, signal) {
  const response = await fetch(path, {
    method: "POST",
    headers: headers(false, { "content-type": "application/json" }),
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await failure(response);
  onEvent({ open: true }, response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (!data || data === "[DONE]") continue;
      onEvent(JSON.parse(data), response);
    }
  }
  return response;
}

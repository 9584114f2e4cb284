// The console's router: one view per hash route, drawn into <main>. A view that
// meets a 401 sends the person to the key form; nothing is shown without a key
// the proxy accepts.
import { api, ApiError, keys } from "./api.js";
import { errorBox, h, show } from "./dom.js";
import { traceList, traceView } from "./traces.js";
import { catalogSearch, toolPage } from "./catalog.js";
import { overview } from "./overview.js";
import { playground } from "./playground.js";
import { addTool } from "./addtool.js";
import { keysPage } from "./keys.js";

const ROUTES = [
  [/^#\/overview$/, overview],
  [/^#\/traces$/, traceList],
  [/^#\/traces\/([0-9a-f]{32})$/, traceView],
  [/^#\/catalog$/, catalogSearch],
  [/^#\/tools\/([A-Za-z0-9_-]{1,64})$/, toolPage],
  [/^#\/playground$/, playground],
  [/^#\/add$/, addTool],
  [/^#\/keys$/, keysPage],
];

const main = document.getElementById("main");
let leave = null; // the current view's clean-up (a poll, a stream)

function parse(hash) {
  const [path, query = ""] = (hash || "#/traces").split("?");
  return { path, params: new URLSearchParams(query) };
}

async function render() {
  if (leave) { leave(); leave = null; }
  const { path, params } = parse(location.hash);
  markNav(path);
  const found = ROUTES.find(([pattern]) => pattern.test(path));
  if (!found) { location.hash = "#/traces"; return; }
  const [pattern, view] = found;
  const match = path.match(pattern);
  try {
    leave = (await view(main, { args: match.slice(1).map(decodeURIComponent), params })) || null;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) signIn(error.message);
    else show(main, errorBox(error));
  }
}

function markNav(path) {
  for (const link of document.querySelectorAll("#nav a")) {
    const current = path.startsWith(link.getAttribute("href"));
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function signIn(problem) {
  keys.forget();
  document.getElementById("sign-out").hidden = true;
  const input = h("input", { type: "password", id: "master-key", autocomplete: "off", placeholder: "master key" });
  const form = h("form", { class: "card sign-in", id: "sign-in" },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "The console reads the proxy's API with its master key (TOOLGRAPH_MASTER_KEY); leave it empty when the proxy has none. It is kept in this tab only, until you close it or sign out."),
    problem ? h("p", { class: "error", role: "alert" }, problem) : null,
    h("label", { for: "master-key" }, "Master key"), input,
    h("button", { type: "submit" }, "Open the console"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    keys.master = input.value.trim();
    try {
      await api("/v1/toolgraph/traces", { query: { limit: 1 } });
    } catch (error) {
      signIn(error.message);
      return;
    }
    keys.signedIn = true;
    start();
  });
  show(main, form);
  input.focus();
}

async function start() {
  if (!keys.signedIn) { signIn(null); return; } // no request goes out before a key is given
  try {
    await api("/v1/toolgraph/traces", { query: { limit: 1 } });
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) { signIn(error.message); return; }
    show(main, errorBox(error));
    return;
  }
  document.getElementById("sign-out").hidden = !keys.master;
  window.onhashchange = render;
  render();
}

document.getElementById("sign-out").addEventListener("click", () => {
  window.onhashchange = null;
  if (leave) { leave(); leave = null; }
  signIn(null);
});

start();

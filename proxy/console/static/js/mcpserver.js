// Add an MCP server through the registry API (admin key): a command run on the
// proxy's host over stdio (when mcp_registry_commands allows it) or a streamable
// HTTP endpoint. "Check" connects once and lists the server's tools, keeping
// nothing; "Save" adds what was checked: it stays connected, its tools join the
// catalog, and it comes back after a restart.
import { api } from "./api.js";
import { h } from "./dom.js";

const NAME = /^[A-Za-z0-9_-]{1,32}$/;
const SERVERS = "/v1/toolgraph/mcp/servers";

/** The form's card; ``useAdminKey`` stores the typed admin key before each request. */
export function mcpServerForm(useAdminKey) {
  const f = fields();
  const check = h("button", { type: "button", id: "mcp-check" }, "Check");
  const save = h("button", { type: "button", id: "mcp-save", disabled: true }, "Save");
  const result = h("div", { id: "mcp-result" });
  let checked = null; // the server whose check passed
  let tools = []; // the catalog names its check listed

  const send = async (dryRun) => {
    useAdminKey();
    let wanted;
    try { wanted = dryRun ? server(f) : checked; } catch (error) {
      result.replaceChildren(problem(error.message));
      return;
    }
    result.replaceChildren(h("p", { class: "muted" }, dryRun ? "Connecting…" : "Adding…"));
    try {
      const answer = await api(SERVERS, { body: wanted, admin: true, query: { dry_run: dryRun } });
      if (dryRun) {
        result.replaceChildren(...listing(answer));
        checked = wanted;
        tools = answer.tools.map((tool) => tool.name);
      } else {
        result.replaceChildren(...saved(answer, tools));
        checked = null;
      }
    } catch (error) {
      checked = null;
      result.replaceChildren(problem(error.message));
    }
    save.disabled = checked === null;
  };
  for (const field of Object.values(f)) field.addEventListener("input", () => { checked = null; save.disabled = true; });
  const parts = [
    h("div", { class: "form", "data-transport": "stdio" },
      h("label", { for: "mcp-command" }, "Command line"), f.command,
      h("label", { for: "mcp-env" }, "Environment (NAME=value, one a line)"), f.env,
      h("label", { for: "mcp-cwd" }, "Working folder"), f.cwd),
    h("div", { class: "form", "data-transport": "http" },
      h("label", { for: "mcp-url" }, "URL"), f.url,
      h("label", { for: "mcp-headers" }, "Headers (Name: value, one a line)"), f.headers),
  ];
  f.transport.addEventListener("input", () => showTransport(f.transport, parts));
  check.addEventListener("click", () => send(true));
  save.addEventListener("click", () => send(false));
  showTransport(f.transport, parts);
  return h("section", { class: "card form", id: "mcp-form" },
    h("h2", {}, "An MCP server"),
    h("p", { class: "muted" }, "Its tools join the catalog as <name>_<tool>. A command runs on the proxy's host, so the proxy adds one only with mcp_registry_commands set; an HTTP server's host must pass the tools' egress policy."),
    h("label", { for: "mcp-name" }, "Name"), f.name,
    h("label", { for: "mcp-transport" }, "Transport"), f.transport,
    parts,
    h("div", { class: "filters" }, check, save),
    result);
}

function fields() {
  const area = (id, placeholder) => h("textarea", { id, rows: 2, spellcheck: "false", class: "code", placeholder });
  return {
    name: h("input", { id: "mcp-name", placeholder: "weather", autocomplete: "off" }),
    transport: h("select", { id: "mcp-transport" }, h("option", { value: "stdio" }, "stdio (a command)"), h("option", { value: "http" }, "streamable HTTP (a URL)")),
    command: h("input", { id: "mcp-command", class: "code", spellcheck: "false", placeholder: "npx -y @modelcontextprotocol/server-everything" }),
    env: area("mcp-env", "API_KEY=…"),
    cwd: h("input", { id: "mcp-cwd", class: "code", spellcheck: "false", placeholder: "/srv/mcp (optional)" }),
    url: h("input", { id: "mcp-url", type: "url", class: "code", spellcheck: "false", placeholder: "https://mcp.example.com/mcp" }),
    headers: area("mcp-headers", "Authorization: Bearer …"),
  };
}

function showTransport(transport, parts) {
  for (const part of parts) part.hidden = part.dataset.transport !== transport.value;
}

/** The server as the API takes it (a settings file's mcp_servers item); an Error
 * naming the field when one is wrong. */
export function server(f) {
  const name = f.name.value.trim();
  if (!NAME.test(name)) throw new Error("Name: 1 to 32 letters, digits, _ or - (its tools are named <name>_<tool>).");
  if (f.transport.value === "stdio") {
    const command = splitCommand(f.command.value);
    if (!command.length) throw new Error("Command line: give the command that starts the server, e.g. npx -y @modelcontextprotocol/server-everything.");
    const wanted = { name, command, env: pairs(f.env.value, "=", "Environment") };
    if (f.cwd.value.trim()) wanted.cwd = f.cwd.value.trim();
    return wanted;
  }
  const url = f.url.value.trim();
  let parsed = null;
  try { parsed = new URL(url); } catch { /* said below */ }
  if (!parsed || !["http:", "https:"].includes(parsed.protocol)) throw new Error("URL: give the server's http:// or https:// endpoint, e.g. https://mcp.example.com/mcp.");
  return { name, url, headers: pairs(f.headers.value, ":", "Headers") };
}

/** A command line as its arguments: spaces separate, quotes group, a backslash
 * escapes the next character (as a POSIX shell does, without expansion). */
export function splitCommand(text) {
  const argv = [];
  let current = null, quote = null;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quote === "'") { if (c === "'") quote = null; else current += c; continue; }
    if (c === "\\" && i + 1 < text.length && (quote === null || "\"\\".includes(text[i + 1]))) { current = (current ?? "") + text[++i]; continue; }
    if (quote === "\"") { if (c === "\"") quote = null; else current += c; continue; }
    if (c === "'" || c === "\"") { quote = c; current = current ?? ""; continue; }
    if (/\s/.test(c)) { if (current !== null) argv.push(current); current = null; continue; }
    current = (current ?? "") + c;
  }
  if (quote) throw new Error(`Command line: a ${quote} quote is not closed.`);
  if (current !== null) argv.push(current);
  return argv;
}

function pairs(text, separator, label) {
  const found = {};
  text.split("\n").forEach((line, index) => {
    if (!line.trim()) return;
    const cut = line.indexOf(separator);
    const key = cut > 0 ? line.slice(0, cut).trim() : "";
    if (!key) throw new Error(`${label}, line ${index + 1}: write it as NAME${separator === ":" ? ": " : "="}value.`);
    found[key] = line.slice(cut + 1).trim();
  });
  return found;
}

function problem(message) {
  return h("p", { class: "error", role: "alert" }, message);
}

function listing(answer) {
  const n = answer.tools.length;
  return [
    h("h2", {}, `${answer.name} answered: ${n} tool${n === 1 ? "" : "s"}`),
    h("p", { class: "muted" }, "Nothing is saved yet. Save adds the server and these tools to the catalog."),
    h("ul", { class: "checks", id: "mcp-tools" }, answer.tools.map((tool) => h("li", { "data-tool": tool.name },
      h("code", {}, tool.name), tool.mcp_name !== tool.name ? [" ", h("span", { class: "muted" }, `(${tool.mcp_name})`)] : null,
      tool.description ? [" · ", tool.description] : null))),
    answer.refused.length ? h("div", { class: "error" }, "Left out of the catalog:", h("ul", {}, answer.refused.map((r) => h("li", {}, r)))) : null,
  ].filter(Boolean);
}

function saved(answer, tools) {
  const state = answer.connected
    ? h("span", { class: "badge passed" }, "connected")
    : h("span", { class: "badge failed" }, "not connected: the proxy retries it");
  return [
    h("h2", { class: "saved" }, `Added ${answer.name} `, state),
    h("p", {}, `${answer.tools} tool${answer.tools === 1 ? "" : "s"} in the catalog (${answer.transport}: ${answer.target}).`),
    h("ul", { class: "checks", id: "mcp-saved" }, tools.map((name) => h("li", {}, h("a", { href: `#/tools/${encodeURIComponent(name)}` }, name)))),
  ];
}

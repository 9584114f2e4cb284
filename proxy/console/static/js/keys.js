// Virtual keys (admin key): list them, create one (its secret shown once, here), revoke
// one. The page reads and writes /v1/toolgraph/keys, the admin API the CLI uses too;
// nothing is read before an admin key is given.
import { api, keys } from "./api.js";
import { h, show, when } from "./dom.js";

const KEYS = "/v1/toolgraph/keys";

export async function keysPage(main) {
  const admin = h("input", { id: "keys-admin-key", type: "password", autocomplete: "off", placeholder: "admin key", value: keys.admin });
  const open = h("button", { type: "button", id: "keys-open" }, "List keys");
  const list = h("div", { id: "key-list" });
  const made = h("div", { id: "key-created", "aria-live": "polite" });
  const refresh = async () => {
    keys.admin = admin.value.trim();
    if (!keys.admin) {
      list.replaceChildren(h("p", { class: "muted" }, "Give the admin key to list the keys."));
      return;
    }
    try {
      const answer = await api(KEYS, { admin: true });
      list.replaceChildren(keyTable(answer.data, revoke));
    } catch (error) {
      list.replaceChildren(h("p", { class: "error", role: "alert" }, error.message));
    }
  };
  const revoke = async (key) => {
    if (!confirm(`Revoke the key '${key.name}' (…${key.hint})? Its clients are refused from their next request.`)) return;
    try {
      await api(`${KEYS}/${encodeURIComponent(key.id)}`, { method: "DELETE", admin: true });
    } catch (error) {
      list.replaceChildren(h("p", { class: "error", role: "alert" }, error.message));
      return;
    }
    made.replaceChildren();
    await refresh();
  };
  const create = async (spec) => {
    keys.admin = admin.value.trim();
    try {
      const created = await api(KEYS, { body: spec, admin: true });
      made.replaceChildren(secretBox(created));
    } catch (error) {
      made.replaceChildren(h("p", { class: "error", role: "alert" }, error.message));
      return;
    }
    await refresh();
  };
  open.addEventListener("click", refresh);
  show(main, h("h1", {}, "Keys"),
    h("p", { class: "muted" }, "Virtual keys are client keys, each a tenant of its own with a tool scope and limits. Managing them needs the admin key (TOOLGRAPH_ADMIN_KEY), kept in this tab like the master key. A key's secret is shown once, when it is created."),
    h("div", { class: "card form" }, h("label", { for: "keys-admin-key" }, "Admin key"), admin, h("div", { class: "filters" }, open)),
    h("section", { class: "card" }, h("h2", {}, "Keys"), list),
    createForm(create), made);
  await refresh();
}

function keyTable(data, revoke) {
  if (!data.length) return h("p", { class: "muted", id: "no-keys" }, "No virtual key yet.");
  return h("div", { class: "scroll" }, h("table", { id: "keys-table" },
    h("thead", {}, h("tr", {}, ["Name", "Key", "Created", "Tool scope", "Limits", ""].map((t) => h("th", {}, t)))),
    h("tbody", {}, data.map((key) => h("tr", { "data-key": key.id },
      h("td", {}, key.name),
      h("td", {}, h("code", {}, `${key.id} …${key.hint}`)),
      h("td", {}, when(key.created)),
      h("td", {}, scopeText(key.scope)),
      h("td", {}, limitsText(key.limits)),
      h("td", {}, h("button", { type: "button", class: "revoke", onclick: () => revoke(key) }, "Revoke")))))));
}

function scopeText(scope) {
  const parts = [["tools", scope.tools], ["packs", scope.packs], ["MCP servers", scope.mcp_servers]]
    .filter(([, names]) => names !== null && names !== undefined)
    .map(([label, names]) => `${label}: ${names.length ? names.join(", ") : "none"}`);
  return parts.length ? parts.join("; ") : "every tool";
}

function limitsText(limits) {
  const parts = [];
  if (limits.requests_per_minute) parts.push(`${limits.requests_per_minute} a minute`);
  if (limits.max_concurrent) parts.push(`${limits.max_concurrent} at once`);
  return parts.length ? parts.join(", ") : "none";
}

/** Names from a field: comma or space separated; empty: not set (null). */
function names(input) {
  const text = input.value.trim();
  return text ? text.split(/[\s,]+/).filter(Boolean) : null;
}

function createForm(create) {
  const field = (id, label, attrs = {}) => [h("label", { for: id }, label), h("input", { id, autocomplete: "off", ...attrs })];
  const [nameLabel, name] = field("key-name", "Name", { placeholder: "analytics", required: true });
  const [toolsLabel, tools] = field("key-tools", "Tools (names; * and ? match as in a shell)", { placeholder: "evaluate_*, get_weather" });
  const [packsLabel, packs] = field("key-packs", "Built-in packs", { placeholder: "course_assistant" });
  const [mcpLabel, mcp] = field("key-mcp", "MCP servers", { placeholder: "crm" });
  const [rpmLabel, rpm] = field("key-rpm", "Requests a minute (empty: no limit)", { type: "number", min: 1 });
  const [concurrentLabel, concurrent] = field("key-concurrent", "Requests at once (empty: no limit)", { type: "number", min: 1 });
  const none = h("input", { id: "key-no-tools", type: "checkbox" });
  const submit = h("button", { type: "submit", id: "key-create" }, "Create key");
  const form = h("form", { class: "card form", id: "key-form" }, h("h2", {}, "Create a key"),
    nameLabel, name,
    h("p", { class: "muted small" }, "Leave the three scope fields empty for a key that may use every tool."),
    toolsLabel, tools, packsLabel, packs, mcpLabel, mcp,
    h("label", { for: "key-no-tools" }, none, " No tool at all (chat only)"),
    rpmLabel, rpm, concurrentLabel, concurrent, h("div", { class: "filters" }, submit));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const scope = none.checked ? { tools: [] } : { tools: names(tools), packs: names(packs), mcp_servers: names(mcp) };
    const limits = { requests_per_minute: Number(rpm.value) || null, max_concurrent: Number(concurrent.value) || null };
    create({ name: name.value.trim(), scope, limits });
  });
  return form;
}

function secretBox(created) {
  const secret = h("code", { id: "key-secret" }, created.key);
  const copy = h("button", { type: "button", id: "key-copy" }, "Copy");
  copy.addEventListener("click", async () => {
    await navigator.clipboard.writeText(created.key);
    copy.textContent = "Copied";
  });
  return h("section", { class: "card saved", role: "status" },
    h("h2", {}, `Key '${created.name}' created`),
    h("p", {}, "Its secret, shown this once (toolgraph keeps only its digest): give it to the client as its OpenAI API key."),
    h("p", { class: "scroll" }, secret, " ", copy));
}

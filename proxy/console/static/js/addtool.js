// Add tools through the registry API (admin key): paste OpenAI function specs or an
// OpenAPI document, or give an OpenAPI document's URL (the proxy fetches it under the
// tools' egress policy: this page may only talk to its own origin), check them (the registry test-calls each under the egress
// policy and stores nothing), read the result, then save; or add an MCP server
// (mcpserver.js).
import { api, keys } from "./api.js";
import { codeBlock, h, show } from "./dom.js";
import { mcpServerForm } from "./mcpserver.js";

const EXAMPLE = JSON.stringify([{
  name: "get_weather",
  description: "Current weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  "x-endpoint": { method: "GET", url: "https://weather.example.com/now" },
}], null, 2);

export async function addTool(main) {
  const admin = h("input", { id: "admin-key", type: "password", autocomplete: "off", placeholder: "admin key", value: keys.admin });
  const format = h("select", { id: "tool-format" }, h("option", { value: "openai" }, "OpenAI function specs"), h("option", { value: "openapi" }, "OpenAPI 3 document"), h("option", { value: "openapi_url" }, "OpenAPI 3 document at a URL"));
  const spec = h("textarea", { id: "tool-spec", rows: 14, spellcheck: "false", class: "code" }, EXAMPLE);
  const specLabel = h("label", { for: "tool-spec" }, "Specification (JSON)");
  const url = h("input", { id: "tool-url", type: "url", placeholder: "https://api.example.com/openapi.json (JSON or YAML)", hidden: true });
  const urlLabel = h("label", { for: "tool-url", hidden: true }, "URL of the document (the proxy fetches it, under the egress policy)");
  const category = h("input", { id: "tool-category", placeholder: "category (optional)" });
  const testArgs = h("textarea", { id: "tool-test-args", rows: 3, spellcheck: "false", class: "code", placeholder: '{"get_weather": {"city": "Oslo"}}  (test-call arguments, optional)' });
  const check = h("button", { type: "button", id: "tool-check" }, "Check");
  const save = h("button", { type: "button", id: "tool-save", disabled: true }, "Save");
  const result = h("div", { id: "tool-result" });
  let checked = null; // the body whose dry run passed

  const source = () => {
    if (format.value === "openapi_url") return { openapi_url: url.value.trim() };
    const parsed = JSON.parse(spec.value);
    return format.value === "openai" ? { openai: Array.isArray(parsed) ? parsed : [parsed] } : { openapi: parsed };
  };
  const body = () => {
    const wanted = source();
    if (category.value.trim()) wanted.category = category.value.trim();
    if (testArgs.value.trim()) wanted.test_arguments = JSON.parse(testArgs.value);
    return wanted;
  };
  const useAdminKey = () => { keys.admin = admin.value.trim(); };
  const send = async (dryRun) => {
    useAdminKey();
    let wanted;
    try { wanted = dryRun ? body() : checked; } catch (error) {
      result.replaceChildren(h("p", { class: "error", role: "alert" }, `Not JSON: ${error.message}`));
      return;
    }
    try {
      const answer = await api("/v1/toolgraph/tools", { body: wanted, admin: true, query: { dry_run: dryRun } });
      result.replaceChildren(...outcome(answer));
      checked = dryRun && answer.checks.every((c) => c.outcome !== "failed") ? wanted : null;
    } catch (error) {
      checked = null;
      result.replaceChildren(h("p", { class: "error", role: "alert" }, error.message));
    }
    save.disabled = checked === null;
  };
  for (const field of [spec, url, category, testArgs, format]) field.addEventListener("input", () => { checked = null; save.disabled = true; });
  format.addEventListener("input", () => {
    const fetched = format.value === "openapi_url";
    for (const el of [spec, specLabel]) el.hidden = fetched;
    for (const el of [url, urlLabel]) el.hidden = !fetched;
  });
  check.addEventListener("click", () => send(true));
  save.addEventListener("click", () => send(false));
  show(main, h("h1", {}, "Add a tool"),
    h("p", { class: "muted" }, "Writes need the admin key (TOOLGRAPH_ADMIN_KEY), kept in this tab like the master key. Check stores nothing: it runs each tool once under the egress policy, or connects to the MCP server and lists its tools; Save stores what was checked."),
    h("div", { class: "card form" }, h("label", { for: "admin-key" }, "Admin key"), admin),
    h("section", { class: "card form", id: "spec-form" }, h("h2", {}, "Tools from a specification"), h("label", { for: "tool-format" }, "Format"), format,
      specLabel, spec, urlLabel, url, category, testArgs, h("div", { class: "filters" }, check, save), result),
    mcpServerForm(useAdminKey));
}

function outcome(answer) {
  const verb = answer.dry_run ? "Checked" : "Saved";
  return [
    h("h2", {}, `${verb} ${answer.data.length} tool${answer.data.length === 1 ? "" : "s"}`),
    h("ul", { class: "checks" }, answer.data.map((tool) => {
      const check = answer.checks.find((c) => c.tool === tool.name);
      return h("li", { "data-tool": tool.name },
        answer.dry_run ? h("code", {}, tool.name) : h("a", { href: `#/tools/${encodeURIComponent(tool.name)}` }, tool.name), " ",
        check ? h("span", { class: `badge ${check.outcome}` }, check.outcome) : null, check?.detail ? [" ", check.detail] : null);
    })),
    codeBlock(answer, "The registry's answer"),
  ];
}

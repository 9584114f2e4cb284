// Catalog search with the live retriever (hybrid, BM25 and dense side by side) and a
// tool's page: its schema, provenance, recent calls and its edges in the tool graph.
import { api } from "./api.js";
import { codeBlock, h, s, seconds, show, when } from "./dom.js";

const METHODS = [["hybrid", "Hybrid (what the planner uses)"], ["bm25", "BM25"], ["dense", "Dense"]];

export async function catalogSearch(main, { params }) {
  const q = params.get("q") || "";
  const input = h("input", { id: "catalog-query", name: "q", type: "search", value: q, placeholder: "what should a tool do?", required: true });
  const form = h("form", { class: "filters", id: "catalog-search" }, input, h("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/catalog?q=${encodeURIComponent(input.value)}`;
  });
  const stats = await api("/v1/toolgraph/catalog/stats");
  const results = q ? await api("/v1/toolgraph/catalog/search", { query: { q, k: 10 } }) : null;
  show(main, h("h1", {}, "Catalog"), graphStats(stats), form,
    results ? h("div", { class: "columns", id: "search-results" }, METHODS.map(([key, title]) => hitList(title, key, results[key]))) : null);
  input.focus();
}

function graphStats(stats) {
  const edges = Object.entries(stats.edges).map(([kind, n]) => `${n} ${kind}`).join(", ");
  return h("p", { class: "muted", id: "graph-stats" },
    `${stats.tools} tools in ${stats.groups} groups and ${stats.categories} categories; edges: ${edges || "none"}; ${stats.components} connected parts, the largest ${stats.largest_component} tools.`);
}

function hitList(title, key, hits) {
  return h("section", { class: "card", "data-method": key }, h("h2", {}, title),
    hits.length ? h("ol", { class: "hits" }, hits.map((hit) => h("li", {},
      h("a", { href: `#/tools/${encodeURIComponent(hit.name)}` }, hit.name), " ",
      h("span", { class: "num muted" }, hit.score.toFixed(4)),
      h("div", { class: "muted small" }, hit.category, " · ", hit.description)))) : h("p", { class: "muted" }, "No hit."));
}

export async function toolPage(main, { args: [name] }) {
  const [tool, recent] = await Promise.all([
    api(`/v1/toolgraph/catalog/tools/${encodeURIComponent(name)}`),
    api("/v1/toolgraph/traces", { query: { tool: name, limit: 20 } }),
  ]);
  show(main,
    h("p", {}, h("a", { href: "#/catalog" }, "← catalog")),
    h("h1", {}, h("code", {}, tool.name)),
    h("p", {}, tool.description),
    h("dl", { class: "facts" },
      h("dt", {}, "Category"), h("dd", {}, `${tool.category}${tool.group ? " / " + tool.group : ""}`),
      h("dt", {}, "Source"), h("dd", {}, `${tool.provenance.format}${tool.provenance.item ? " · " + tool.provenance.item : ""}`),
      h("dt", {}, "Availability"), h("dd", {}, tool.availability.toFixed(2)),
      h("dt", {}, "Callable now"), h("dd", {}, tool.callable ? "yes" : "no (its source is down)"),
      tool.endpoint ? [h("dt", {}, "Endpoint"), h("dd", {}, h("code", {}, `${tool.endpoint.method} ${tool.endpoint.url}`))] : null),
    h("section", { class: "card" }, h("h2", {}, "Graph neighbourhood"), neighbourhood(tool)),
    (tool.learned || []).length ? h("section", { class: "card" }, h("h2", {}, "Learned from your runs"), learned(tool)) : null,
    h("section", { class: "card" }, h("h2", {}, "Recent calls"), recentCalls(tool.name, recent.data)),
    h("section", { class: "card" }, h("h2", {}, "Parameters"), codeBlock(tool.parameters)));
}

const KIND_CLASS = { STRONG_DEP: "strong", WEAK_DEP: "weak", SEQUENTIAL: "sequential" };

// The edges this client's own runs observed into and out of the tool (learning on).
function learned(tool) {
  return h("table", { class: "candidates" }, h("thead", {}, h("tr", {}, ["", "Tool", "Succeeded", "Failed"].map((c) => h("th", {}, c)))),
    h("tbody", {}, tool.learned.map((e) => {
      const other = e.direction === "out" ? e.target : e.source;
      return h("tr", {}, h("td", {}, e.direction === "out" ? "→" : "←"),
        h("td", {}, h("a", { href: `#/tools/${encodeURIComponent(other)}` }, other)),
        h("td", { class: "num" }, e.succeeded), h("td", { class: "num" }, e.failed));
    })));
}

function neighbourhood(tool) {
  if (!tool.edges.length) return h("p", { class: "muted" }, "No edge: no recorded path or schema match links this tool to another yet.");
  const size = 460, mid = size / 2, radius = 170;
  const nodes = tool.edges.map((edge, i) => {
    const angle = (2 * Math.PI * i) / tool.edges.length - Math.PI / 2;
    return { edge, x: mid + radius * Math.cos(angle), y: mid + radius * Math.sin(angle) };
  });
  const lines = nodes.map(({ edge, x, y }) => s("line", {
    class: `graph-edge ${KIND_CLASS[edge.kind] || ""}`, x1: edge.direction === "out" ? mid : x, y1: edge.direction === "out" ? mid : y,
    x2: edge.direction === "out" ? x : mid, y2: edge.direction === "out" ? y : mid, "stroke-width": 1 + 4 * edge.weight, "marker-end": "url(#graph-arrow)",
  }, s("title", {}, `${edge.kind} ${edge.weight}${edge.resource ? " · " + edge.resource : ""}`)));
  const others = nodes.map(({ edge, x, y }) => s("a", { href: `#/tools/${encodeURIComponent(edge.tool)}`, class: "graph-node", "data-tool": edge.tool },
    s("circle", { cx: x, cy: y, r: 7 }), s("text", { x, y: y - 11, "text-anchor": "middle" }, edge.tool.slice(0, 26))));
  return [
    h("div", { class: "scroll" }, s("svg", { id: "neighbourhood", width: size, height: size, viewBox: `0 0 ${size} ${size}`, role: "img", "aria-label": `Edges of ${tool.name}` },
      s("defs", {}, s("marker", { id: "graph-arrow", viewBox: "0 0 10 10", refX: 18, refY: 5, markerWidth: 5, markerHeight: 5, orient: "auto" }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-head" }))),
      lines, others, s("circle", { cx: mid, cy: mid, r: 10, class: "graph-centre" }), s("text", { x: mid, y: mid + 26, "text-anchor": "middle", class: "node-tool" }, tool.name))),
    h("p", { class: "muted legend" }, "Solid: strong dependency (an output is a required input); dashed: weak (optional input); dotted: seen in sequence. Thicker is heavier. Click a tool to walk on."),
    h("table", { class: "candidates" }, h("thead", {}, h("tr", {}, ["", "Tool", "Kind", "Weight", "Resource"].map((c) => h("th", {}, c)))),
      h("tbody", {}, tool.edges.map((e) => h("tr", {}, h("td", {}, e.direction === "out" ? "→" : "←"),
        h("td", {}, h("a", { href: `#/tools/${encodeURIComponent(e.tool)}` }, e.tool)), h("td", {}, e.kind), h("td", { class: "num" }, e.weight.toFixed(2)), h("td", {}, e.resource))))),
  ];
}

// Each kept trace that called the tool: when, each call's own outcome, then how the
// request ended and how long it took.
function recentCalls(name, traces) {
  if (!traces.length) return h("p", { class: "muted" }, "No kept trace ran this tool.");
  return h("ul", { id: "recent-calls" }, traces.map((t) => h("li", { "data-trace": t.id },
    h("a", { href: `#/traces/${t.id}` }, when(t.created)), " ",
    (t.calls || []).filter((c) => c.tool === name).map((c) => [h("span", { class: `badge ${c.outcome || "none"}`, "data-node": c.node }, c.outcome || "not run"), " "]),
    h("span", { class: "muted" }, `request: ${t.outcome} · ${seconds(t.seconds)}`))));
}

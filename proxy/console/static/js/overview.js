// The process's own metrics: totals since it started, and what changed over the
// minutes this page has been open (snapshots every few seconds, subtracted).
import { api } from "./api.js";
import { h, seconds, show } from "./dom.js";

const EVERY_MS = 5000;
const KEEP = 120; // ten minutes of snapshots

export async function overview(main) {
  const snapshots = [];
  const body = h("div", { id: "overview" });
  show(main, h("h1", {}, "Overview"), body);
  let timer = null;
  const tick = async () => {
    try {
      snapshots.push({ at: Date.now(), data: await api("/v1/toolgraph/overview") });
      if (snapshots.length > KEEP) snapshots.shift();
      body.replaceChildren(...draw(snapshots));
    } catch (error) {
      body.replaceChildren(h("p", { class: "error" }, error.message));
    }
    timer = setTimeout(tick, EVERY_MS);
  };
  await tick();
  return () => clearTimeout(timer);
}

function sum(values) {
  return Object.values(values || {}).reduce((a, b) => a + b, 0);
}

function delta(now, then, key) {
  const found = {};
  for (const [k, v] of Object.entries(now[key] || {})) found[k] = v - ((then?.[key] || {})[k] || 0);
  return found;
}

function draw(snapshots) {
  const now = snapshots.at(-1).data, first = snapshots[0];
  const minutes = ((snapshots.at(-1).at - first.at) / 60000).toFixed(1);
  const errors = (status) => Object.entries(status).filter(([code]) => code >= "400").reduce((a, [, n]) => a + n, 0);
  const recent = delta(now, first.data, "requests");
  const q = now.latency_quantiles;
  return [
    h("div", { class: "tiles" },
      tile("Requests", sum(now.requests), `${sum(recent)} in the last ${minutes} min`),
      tile("Errors", errors(now.requests), `${errors(recent)} in the last ${minutes} min`),
      tile("Latency p50", seconds(q["0.5"]), "≤ bucket edge, since start"),
      tile("Latency p90", seconds(q["0.9"]), ""),
      tile("Latency p99", seconds(q["0.99"]), ""),
      tile("In flight", now.in_flight, "now")),
    table("Requests by status", now.requests, delta(now, first.data, "requests")),
    table("Requests by mode", now.requests_by_mode, delta(now, first.data, "requests_by_mode")),
    table("Tool calls by outcome", now.tool_calls, delta(now, first.data, "tool_calls")),
    table("Tool calls by tool", now.tools, delta(now, first.data, "tools")),
    table("Upstream tokens", now.tokens, delta(now, first.data, "tokens")),
    h("section", { class: "card" }, h("h2", {}, "Orchestration stages (mean)"),
      h("table", {}, h("tbody", {}, Object.entries(now.stage_seconds).map(([stage, v]) =>
        h("tr", {}, h("td", {}, stage), h("td", { class: "num" }, v.count), h("td", { class: "num" }, seconds(v.seconds / v.count))))))),
  ];
}

function tile(title, value, note) {
  return h("div", { class: "tile" }, h("div", { class: "muted" }, title), h("div", { class: "big" }, value ?? "–"), h("div", { class: "muted small" }, note));
}

function table(title, totals, recent) {
  const rows = Object.entries(totals || {}).sort((a, b) => b[1] - a[1]);
  return h("section", { class: "card", "data-table": title }, h("h2", {}, title),
    rows.length ? h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "since start"), h("th", {}, "while open"))),
      h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("td", {}, k || "–"), h("td", { class: "num" }, v), h("td", { class: "num" }, recent[k] || 0)))))
      : h("p", { class: "muted" }, "Nothing yet."));
}

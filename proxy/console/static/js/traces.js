// The trace list and one trace: the plan as a graph with every decision, the
// executed calls as a timeline over wall-clock time, and each call's details.
import { api } from "./api.js";
import { codeBlock, h, s, seconds, show, when } from "./dom.js";

const OUTCOMES = ["", "answer", "question", "error", "cancelled"];

export async function traceList(main, { params }) {
  const query = {
    limit: 100,
    outcome: params.get("outcome") || "",
    tool: params.get("tool") || "",
    min_seconds: params.get("min_seconds") || "",
  };
  const { data } = await api("/v1/toolgraph/traces", { query });
  show(main, h("h1", {}, "Traces"), filters(query), data.length ? traceTable(data) : h("p", { class: "muted", id: "no-traces" }, "No trace matches. Orchestrated requests leave one each (send one from the playground)."));
}

function filters(query) {
  const outcome = h("select", { name: "outcome", id: "filter-outcome" },
    OUTCOMES.map((o) => h("option", { value: o, selected: o === query.outcome }, o || "any outcome")));
  const tool = h("input", { name: "tool", id: "filter-tool", placeholder: "tool name", value: query.tool });
  const slow = h("input", { name: "min_seconds", id: "filter-slow", type: "number", min: 0, step: "any", placeholder: "slower than (s)", value: query.min_seconds });
  const form = h("form", { class: "filters", id: "trace-filters" }, outcome, tool, slow, h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = new URLSearchParams();
    for (const field of [outcome, tool, slow]) if (field.value) wanted.set(field.name, field.value);
    location.hash = `#/traces${wanted.size ? "?" + wanted : ""}`;
  });
  return form;
}

function traceTable(summaries) {
  const rows = summaries.map((t) => h("tr", { "data-trace": t.id },
    h("td", {}, h("a", { href: `#/traces/${t.id}` }, when(t.created))),
    h("td", { class: "wrap" }, t.conversation),
    h("td", {}, badge(t.outcome)),
    h("td", {}, t.tools.map((name) => h("span", { class: "chip" }, name))),
    h("td", { class: "num" }, seconds(t.seconds)),
    h("td", { class: "num" }, t.failed_calls ? h("span", { class: "bad" }, t.failed_calls) : "0")));
  return h("div", { class: "scroll" }, h("table", { id: "trace-list" },
    h("thead", {}, h("tr", {}, ["When", "Request", "Outcome", "Tools", "Took", "Failed"].map((c) => h("th", {}, c)))),
    h("tbody", {}, rows)));
}

function badge(kind) {
  return h("span", { class: `badge ${kind || "none"}` }, kind || "–");
}

export async function traceView(main, { args: [id] }) {
  const trace = await api(`/v1/toolgraph/traces/${id}`);
  show(main,
    h("p", {}, h("a", { href: "#/traces" }, "← all traces")),
    h("h1", {}, "Trace ", h("code", {}, id)),
    facts(trace),
    section("Stages", stageBars(trace.timings || {})),
    section("Upstream calls", upstreamCalls(trace.upstream_usage || [])),
    trace.plan ? section("Plan", planGraph(trace.plan), decisions(trace.plan)) : null,
    section("Timeline", trace.calls.length ? timeline(trace.calls) : h("p", { class: "muted" }, "No tool ran.")),
    trace.calls.length ? section("Calls", trace.calls.map(callDetails)) : null,
    section("Request", h("pre", { class: "code wrap" }, trace.conversation || "")),
  );
}

function section(title, ...body) {
  return h("section", { class: "card", id: `section-${title.toLowerCase()}` }, h("h2", {}, title), body);
}

function facts(trace) {
  const usage = trace.usage || {};
  const rows = [
    ["Outcome", badge(trace.answer?.kind)],
    ["When", when(trace.created)],
    ["Model", `${trace.model} → ${trace.upstream_model}`],
    ["Took", seconds(trace.timings?.total)],
    ["Streamed", trace.stream ? "yes" : "no"],
    ["Upstream calls", trace.upstream_calls ?? "–"],
    ["Tokens", `${usage.prompt_tokens ?? 0} in, ${usage.completion_tokens ?? 0} out`],
    trace.gate ? ["Gate", `${trace.gate.decision} (${trace.gate.score.toFixed(3)})`] : null,
    trace.deadline_exceeded ? ["Deadline", h("span", { class: "bad" }, "exceeded")] : null,
    trace.answer?.error ? ["Error", h("span", { class: "bad" }, trace.answer.error.message)] : null,
  ].filter(Boolean);
  return h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function stageBars(timings) {
  const total = timings.total || Math.max(0, ...Object.values(timings)) || 1;
  const stages = Object.entries(timings).filter(([name]) => name !== "total");
  if (!stages.length) return h("p", { class: "muted" }, "No stage timings.");
  return h("div", { class: "stages" }, stages.map(([name, took]) => {
    const bar = h("span", { class: "stage-bar" });
    bar.style.width = `${Math.max(0.5, (100 * took) / total)}%`;
    return h("div", { class: "stage-row", "data-stage": name },
      h("span", { class: "stage-name" }, name), h("span", { class: "stage-track" }, bar), h("span", { class: "num" }, seconds(took)));
  }));
}

// Each upstream LLM call of the request, in the order the replies came, with its tokens.
function upstreamCalls(calls) {
  if (!calls.length) return h("p", { class: "muted" }, "No upstream call reported its usage.");
  const sum = (key) => calls.reduce((total, c) => total + c[key], 0);
  const rows = calls.map((c, i) => h("tr", { "data-purpose": c.purpose, "data-about": c.about },
    h("td", { class: "num" }, i + 1),
    h("td", {}, c.purpose || "–"),
    h("td", {}, c.about ? h("code", {}, c.about) : ""),
    h("td", { class: "num prompt" }, c.prompt_tokens),
    h("td", { class: "num completion" }, c.completion_tokens),
    h("td", { class: "num" }, c.prompt_tokens + c.completion_tokens)));
  const total = h("tr", { class: "total" }, h("td", {}), h("td", {}, "all"), h("td", {}),
    h("td", { class: "num" }, sum("prompt_tokens")), h("td", { class: "num" }, sum("completion_tokens")),
    h("td", { class: "num" }, sum("prompt_tokens") + sum("completion_tokens")));
  return h("div", { class: "scroll" }, h("table", { id: "upstream-calls" },
    h("thead", {}, h("tr", {}, ["#", "For", "About", "Prompt tokens", "Completion tokens", "Total"].map((c, i) => h("th", { class: i === 0 || i > 2 ? "num" : null }, c)))),
    h("tbody", {}, rows), h("tfoot", {}, total)));
}

// --- the plan: sub-tasks in columns by depth (a step right of every step it needs)

const BOX_W = 230, BOX_H = 74, GAP_X = 60, GAP_Y = 22;

function depths(subtasks) {
  const depth = {};
  const byId = Object.fromEntries(subtasks.map((t) => [t.id, t]));
  const of = (id, seen = new Set()) => {
    if (depth[id] !== undefined) return depth[id];
    if (seen.has(id) || !byId[id]) return 0;
    seen.add(id);
    depth[id] = 1 + Math.max(-1, ...byId[id].needs.map((n) => of(n, seen)));
    return depth[id];
  };
  subtasks.forEach((t) => of(t.id));
  return depth;
}

function planGraph(plan) {
  if (plan.no_tools) return h("p", { class: "muted" }, "The planner found that no tool is needed.");
  const depth = depths(plan.subtasks);
  const columns = [];
  for (const task of plan.subtasks) (columns[depth[task.id]] ||= []).push(task);
  const at = {};
  columns.forEach((tasks, col) => tasks.forEach((task, row) => {
    at[task.id] = { x: 10 + col * (BOX_W + GAP_X), y: 10 + row * (BOX_H + GAP_Y) };
  }));
  const width = 20 + columns.length * (BOX_W + GAP_X) - GAP_X;
  const height = 20 + Math.max(...columns.map((c) => c.length)) * (BOX_H + GAP_Y) - GAP_Y;
  const marked = new Set(plan.decisions.filter((d) => d.kind !== "pick").map((d) => d.subtask));
  const edges = plan.subtasks.flatMap((task) => task.needs.filter((n) => at[n]).map((need) => {
    const a = at[need], b = at[task.id];
    const x1 = a.x + BOX_W, y1 = a.y + BOX_H / 2, x2 = b.x, y2 = b.y + BOX_H / 2;
    return s("path", { class: "plan-edge", d: `M${x1},${y1} C${x1 + GAP_X / 2},${y1} ${x2 - GAP_X / 2},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)" });
  }));
  const nodes = plan.subtasks.map((task) => planNode(task, plan.choices[task.id], at[task.id], marked.has(task.id)));
  return h("div", { class: "scroll" }, s("svg", { id: "plan-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "The plan: sub-tasks and the tools chosen for them" },
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-head" }))),
    edges, nodes));
}

function clip(text, length) {
  return text.length > length ? text.slice(0, length - 1) + "…" : text;
}

function planNode(task, tool, { x, y }, revised) {
  return s("g", { class: `plan-node${tool ? "" : " no-tool"}${revised ? " revised" : ""}`, "data-subtask": task.id, "data-tool": tool || "" },
    s("title", {}, `${task.id}: ${task.text}`),
    s("rect", { x, y, width: BOX_W, height: BOX_H, rx: 8 }),
    s("text", { x: x + 10, y: y + 18, class: "node-id" }, `${task.id}${task.category ? " · " + task.category : ""}${revised ? " · revised" : ""}`),
    s("text", { x: x + 10, y: y + 38 }, clip(task.text, 30)),
    s("text", { x: x + 10, y: y + 60, class: "node-tool" }, tool ? `→ ${clip(tool, 30)}` : "no tool"));
}

function decisions(plan) {
  const meta = h("p", { class: "muted" },
    `policy ${plan.policy} · ${plan.llm_calls} planner LLM calls · ${plan.tokens} tokens`);
  const notes = plan.notes.length ? h("ul", { class: "notes" }, plan.notes.map((n) => h("li", {}, n))) : null;
  const bySubtask = plan.subtasks.map((task) => {
    const moves = plan.decisions.filter((d) => d.subtask === task.id);
    return h("details", { class: "block decision", "data-subtask": task.id, open: moves.some((d) => d.kind !== "pick") },
      h("summary", {}, `${task.id}: ${task.text} `, h("span", { class: "muted" }, `${moves.length} decision${moves.length === 1 ? "" : "s"}`)),
      moves.map(decision));
  });
  return [meta, notes, bySubtask];
}

// Why a candidate is on the list: retrieval, a graph edge, or this client's own runs.
function why(c) {
  if (c.source === "graph") return `${c.edge} ${c.weight.toFixed(2)} from ${c.via}`;
  if (c.source === "learned") return `learned: this client's runs went here from ${c.via}`;
  return "retrieval";
}

function decision(d) {
  const rows = d.candidates.map((c, i) => h("tr", { class: c.tool === d.chosen ? "chosen" : "" },
    h("td", { class: "num" }, i + 1),
    h("td", {}, h("a", { href: `#/tools/${encodeURIComponent(c.tool)}` }, c.tool)),
    h("td", { class: "num" }, c.score.toFixed(3)),
    h("td", { class: "num" }, c.similarity.toFixed(3)),
    h("td", {}, why(c))));
  return h("div", { class: `move ${d.kind}` },
    h("p", {}, h("span", { class: `badge ${d.kind}` }, d.kind), " ", d.chosen ? h("strong", {}, d.chosen) : h("em", {}, "none fits"), " — ", d.reason),
    rows.length ? h("div", { class: "scroll" }, h("table", { class: "candidates" },
      h("thead", {}, h("tr", {}, ["#", "Candidate", "Score", "Similarity", "Why offered"].map((c) => h("th", {}, c)))),
      h("tbody", {}, rows))) : null);
}

// --- the timeline: one bar per call over the plan's wall-clock time

function criticalPath(calls) {
  const byNode = Object.fromEntries(calls.map((c) => [c.node, c]));
  const path = new Set();
  let last = calls.filter((c) => c.finished !== null).sort((a, b) => b.finished - a.finished)[0];
  while (last) {
    path.add(last.node);
    last = last.needs.map((n) => byNode[n]).filter((c) => c && c.finished !== null).sort((a, b) => b.finished - a.finished)[0];
  }
  return path;
}

function timeline(calls) {
  const end = Math.max(1, ...calls.map((c) => c.finished ?? c.started ?? 0));
  const critical = criticalPath(calls);
  const pct = (ms) => `${(100 * ms) / end}%`;
  const rows = calls.map((call) => {
    const track = h("div", { class: "track" });
    if (call.ready !== null && call.started !== null && call.started > call.ready) {
      const wait = h("span", { class: "wait", title: "ready, waiting for a slot" });
      wait.style.left = pct(call.ready);
      wait.style.width = pct(call.started - call.ready);
      track.append(wait);
    }
    if (call.started !== null) {
      const took = (call.finished ?? end) - call.started;
      const bar = h("span", {
        class: `bar ${call.outcome || "pending"}${critical.has(call.node) ? " critical" : ""}${call.reused ? " reused" : ""}`,
        "data-node": call.node, "data-tool": call.tool, "data-started": call.started, "data-finished": call.finished ?? "",
        title: `${call.tool}: ${call.started.toFixed(1)}–${(call.finished ?? end).toFixed(1)} ms (${call.outcome})`,
      }, `${took.toFixed(0)} ms`);
      bar.style.left = pct(call.started);
      bar.style.width = `max(2px, ${pct(took)})`;
      track.append(bar);
    }
    return h("div", { class: "lane" }, h("span", { class: "lane-label" }, h("code", {}, call.node), " ", call.tool), track);
  });
  return h("div", { id: "timeline" },
    h("div", { class: "lane axis" }, h("span", { class: "lane-label" }), h("div", { class: "track" }, h("span", { class: "tick start" }, "0"), h("span", { class: "tick end" }, `${end.toFixed(0)} ms`))),
    rows,
    h("p", { class: "muted legend" }, "Each bar is one call from its start to its end; the pale part before it is time spent ready but waiting. Bars outlined in dark are the critical path."));
}

function callDetails(call) {
  const saved = call.compression && call.compression.raw_chars
    ? ` · ${call.compression.raw_chars} → ${call.compression.chars} chars (${Math.round(100 * (1 - call.compression.chars / call.compression.raw_chars))} % saved, ${call.compression.method})`
    : "";
  const took = call.started !== null && call.finished !== null ? `${(call.finished - call.started).toFixed(0)} ms` : "not run";
  return h("details", { class: "block call", "data-node": call.node },
    h("summary", {}, h("code", {}, call.node), " ", h("strong", {}, call.tool), " ", h("span", { class: `badge ${call.outcome || "none"}` }, call.outcome || "–"), ` ${took} · ${call.attempts} attempt${call.attempts === 1 ? "" : "s"}${call.reused ? " · reused" : ""}${saved}`),
    h("p", {}, call.task),
    call.needs.length ? h("p", { class: "muted" }, `needs ${call.needs.join(", ")}`) : null,
    call.error ? h("p", { class: "error" }, call.error) : null,
    call.question ? h("p", {}, "Asked: ", call.question) : null,
    call.rejected ? h("p", { class: "muted" }, "First arguments rejected: ", call.rejected) : null,
    h("h3", {}, "Arguments"), codeBlock(call.arguments),
    h("h3", {}, "Raw output"), codeBlock(call.output),
    call.compressed !== null ? [h("h3", {}, "Compressed output (what the answer saw)"), h("pre", { class: "code" }, call.compressed)] : null);
}

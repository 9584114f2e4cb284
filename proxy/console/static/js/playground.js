// Chat with a model of the routing table in any mode, streamed; in orchestrate mode
// the stages and calls show as they happen, and each answer links to its trace.
// The chat (with each answer's progress lines and trace id) is kept in this tab's
// sessionStorage, so leaving the page or reloading it loses none of it; signing out
// forgets it with the keys.
import { api, PLAYGROUND, stream } from "./api.js";
import { h, show } from "./dom.js";

const MODES = ["orchestrate", "select", "passthrough"];
// Select mode cuts the request's own tools to the few the conversation needs, so a
// chat in it brings tools: these, until the person writes others.
const TOOLS = JSON.stringify([
  { type: "function", function: { name: "get_weather", description: "Current weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } },
  { type: "function", function: { name: "convert_currency", description: "Convert an amount between two currencies", parameters: { type: "object", properties: { amount: { type: "number" }, from: { type: "string" }, to: { type: "string" } }, required: ["amount", "from", "to"] } } },
], null, 2);

function stored() {
  try {
    const found = JSON.parse(sessionStorage.getItem(PLAYGROUND) || "[]");
    return Array.isArray(found) ? found : [];
  } catch { return []; } // not ours, or cut: start afresh
}

function keep(conversation) {
  sessionStorage.setItem(PLAYGROUND, JSON.stringify(conversation));
}

export async function playground(main) {
  const { data: models } = await api("/v1/models");
  const model = h("select", { id: "pg-model" }, models.map((m) => h("option", { value: m.id }, m.id)));
  const mode = h("select", { id: "pg-mode" }, MODES.map((m) => h("option", { value: m }, m)));
  const text = h("textarea", { id: "pg-input", rows: 3, placeholder: "Ask something…", required: true });
  const send = h("button", { type: "submit", id: "pg-send" }, "Send");
  const reset = h("button", { type: "button", class: "secondary" }, "New chat");
  const log = h("div", { class: "chat", id: "pg-log" });
  const tools = h("textarea", { id: "pg-tools", rows: 6, spellcheck: "false", class: "code" }, TOOLS);
  const toolsLabel = h("label", { for: "pg-tools" }, "The request's tools (OpenAI tools JSON): select mode forwards the few the conversation needs; the model's calls show, nothing runs them");
  const showTools = () => { for (const el of [tools, toolsLabel]) el.hidden = mode.value !== "select"; };
  mode.addEventListener("input", showTools);
  showTools();
  const form = h("form", { class: "card composer" }, h("div", { class: "filters" }, model, mode, reset), toolsLabel, tools, text, send);
  let running = null;
  const conversation = stored();
  for (const message of conversation) log.append(message.role === "user" ? bubble("user", message.content) : answered(message));
  reset.addEventListener("click", () => { conversation.length = 0; keep(conversation); log.replaceChildren(); });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const content = text.value.trim();
    if (!content) return;
    text.value = "";
    conversation.push({ role: "user", content });
    log.append(bubble("user", content));
    running = new AbortController();
    send.disabled = true;
    try {
      await turn(log, conversation, { model: model.value, mode: mode.value, tools: tools.value }, running.signal);
      keep(conversation);
    } finally {
      send.disabled = false;
      running = null;
    }
  });
  show(main, h("h1", {}, "Playground"), log, form);
  text.focus();
  return () => running?.abort();
}

function bubble(role, content) {
  return h("div", { class: `message ${role}` }, h("div", { class: "role" }, role), h("div", { class: "content" }, content));
}

function traceLink(traceId) {
  return h("a", { href: `#/traces/${traceId}`, class: "trace-link" }, "Open its trace →");
}

function callLines(calls) {
  return calls.map((c) => h("li", {}, h("code", {}, `${c.name}(${c.arguments})`)));
}

/** A stored answer as it showed when it came: its progress lines, text, the tool
 * calls the model asked for (select mode) and its trace link. */
function answered(message) {
  return h("div", { class: "message assistant done" }, h("div", { class: "role" }, "assistant"),
    h("ol", { class: "progress" }, (message.progress || []).map((line) => h("li", {}, line))),
    h("div", { class: "content" }, message.content),
    h("ul", { class: "tool-calls" }, callLines(message.calls || [])),
    h("div", { class: "muted small" }, message.trace ? traceLink(message.trace) : null));
}

async function turn(log, conversation, { model, mode, tools }, signal) {
  const progress = h("ol", { class: "progress", id: "pg-progress" });
  const answer = h("div", { class: "content" });
  const called = h("ul", { class: "tool-calls" });
  const footer = h("div", { class: "muted small" });
  const reply = h("div", { class: "message assistant" }, h("div", { class: "role" }, "assistant"), progress, answer, called, footer);
  log.append(reply);
  let text = "", line = null;
  const calls = []; // the model's tool calls, by index, as they stream
  const messages = conversation.map(({ role, content }) => ({ role, content }));
  const body = { model, messages, stream: true, toolgraph: { mode, progress: true } };
  try {
    if (mode === "select") {
      try { body.tools = JSON.parse(tools); } catch (error) { throw new Error(`The tools are not JSON: ${error.message}`); }
    }
    const response = await stream("/v1/chat/completions", body, (event) => {
      if (event.error) throw new Error(event.error.message);
      for (const choice of event.choices || []) {
        const delta = choice.delta || {};
        if (delta.reasoning_content) {
          for (const part of delta.reasoning_content.split("\n")) {
            if (!part) { line = null; continue; }
            if (!line) { line = h("li", {}); progress.append(line); }
            line.textContent += part;
          }
          if (delta.reasoning_content.endsWith("\n")) line = null;
        }
        if (delta.content) { text += delta.content; answer.textContent = text; }
        for (const part of delta.tool_calls || []) {
          const call = (calls[part.index ?? 0] ||= { name: "", arguments: "" });
          call.name += part.function?.name || "";
          call.arguments += part.function?.arguments || "";
          called.replaceChildren(...callLines(calls.filter(Boolean)));
        }
      }
    }, signal);
    const traceId = mode === "orchestrate" ? response.headers.get("x-toolgraph-trace-id") : null;
    const lines = [...progress.children].map((li) => li.textContent);
    conversation.push({ role: "assistant", content: text, progress: lines, calls: calls.filter(Boolean), trace: traceId });
    if (traceId) footer.append(traceLink(traceId));
    reply.classList.add("done");
  } catch (error) {
    if (error.name !== "AbortError") answer.append(h("p", { class: "error" }, error.message));
    conversation.pop(); // the user's message goes back unanswered: resend it
  }
}

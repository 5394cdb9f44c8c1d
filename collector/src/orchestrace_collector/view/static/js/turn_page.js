// One model call: prompt, completion (with tool calls), tools offered, request parameters, tokens, token
// ids present or not, flags, its content store entries; untrusted content and safety flows marked.

import { errorBox, h, replaceChildren } from "./dom.js";
import { count, seconds } from "./format.js";

function message(m) {
  const untrusted = m.role === "tool";
  return h("li", { class: `message role-${m.role}${untrusted ? " untrusted" : ""}` },
    h("span", { class: "role" }, m.role), m.name ? h("span", { class: "name" }, ` ${m.name}`) : null,
    untrusted ? h("span", { class: "badge untrusted-badge", title: "tool output: untrusted content" }, "untrusted") : null,
    m.content ? h("pre", {}, m.content) : null,
    m.reasoning_content ? h("details", {}, h("summary", {}, "reasoning"), h("pre", {}, m.reasoning_content)) : null,
    m.tool_calls ? h("ul", { class: "tool-calls" }, m.tool_calls.map((call) => h("li", {},
      h("code", {}, call.function?.name || "?"), " ", h("pre", {}, typeof call.function?.arguments === "string" ? call.function.arguments : JSON.stringify(call.function?.arguments, null, 1)),
      call.id ? h("small", {}, ` id ${call.id}`) : null))) : null);
}

function messages(title, list) {
  return h("section", {}, h("h2", {}, title),
    list ? h("ol", { class: "messages" }, list.map(message)) : h("p", {}, "Not captured (content capture was off)."));
}

export function renderTurn(main, episode, payload) {
  if (!payload) {
    replaceChildren(main, errorBox("No such turn", "This episode's latest revision has no turn with that id."));
    return;
  }
  const { turn, contents } = payload;
  const flags = ["tainted", "truncated", "prompt_incomplete", "error"].filter((f) => turn[f]);
  const led = new Set(turn.event_ids || []);
  const flows = (episode.trace.edges || []).filter((e) => e.type === "safety_flow" && (led.has(e.dst) || led.has(e.src)));
  const untrustedEvents = (turn.event_ids || []).map((id) => episode.byId.get(id)).filter((e) => e && e.trusted === false);
  const ids = (name) => (Array.isArray(turn[name]) ? `${count(turn[name].length)} present` : "absent");
  const facts = [
    ["agent", `${turn.agent}${turn.activation ? ` #${turn.activation}` : ""}`], ["model", turn.model], ["provider", turn.provider],
    ["time", `${seconds(turn.t)} to ${seconds(turn.t_end)}`], ["input tokens", count(turn.input_tokens)],
    ["output tokens", count(turn.output_tokens)], ["prompt token ids", ids("prompt_token_ids")],
    ["completion token ids", ids("completion_token_ids")], ["completion logprobs", ids("completion_logprobs")],
    ["finish reason", turn.finish_reason], ["credited reward", turn.reward], ["credit by channel", turn.credit ? JSON.stringify(turn.credit) : null],
    ["events it led to", (turn.event_ids || []).join(", ")], ["flags", flags.join(", ") || "none"],
  ];
  replaceChildren(main,
    h("h1", {}, `Model call ${turn.turn_id}`),
    flags.length ? h("p", { class: "warning", role: "note", id: "turn-flags" }, `Flags: ${flags.join(", ")}${turn.error_type ? ` (${turn.error_type})` : ""}`) : null,
    flows.length || untrustedEvents.length || turn.tainted ? h("p", { class: "warning untrusted", id: "safety-flow", role: "note" },
      turn.tainted ? "This call's prompt held untrusted content (tainted). " : "",
      `Untrusted content: ${untrustedEvents.map((e) => `${e.id} (${e.type}${e.tool ? ` ${e.tool}` : ""})`).join(", ") || "none among its events"}; `,
      `safety_flow edges: ${flows.map((e) => `${e.src} \u2192 ${e.dst}`).join(", ") || "none"}`) : null,
    h("dl", { class: "facts" }, facts.filter(([, v]) => v !== null && v !== undefined && v !== "")
      .flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))])),
    messages("Prompt", turn.prompt), messages("Completion", turn.completion),
    h("section", {}, h("h2", {}, "Tools offered"), turn.tools ? h("ul", {}, turn.tools.map((t) => h("li", {},
      h("code", {}, t.function?.name || "?"), ` ${t.function?.description || ""}`,
      h("details", {}, h("summary", {}, "parameters"), h("pre", {}, JSON.stringify(t.function?.parameters ?? {}, null, 1)))))) : h("p", {}, "none recorded")),
    h("section", {}, h("h2", {}, "Request parameters"), turn.request ? h("pre", {}, JSON.stringify(turn.request, null, 1)) : h("p", {}, "none recorded")),
    h("section", { id: "content-store" }, h("h2", {}, "Content store"),
      ["input_ref", "output_ref"].filter((k) => turn[k]).length ? h("ul", {}, ["input_ref", "output_ref"].filter((k) => turn[k]).map((k) => {
        const text = contents ? contents[turn[k]] : undefined;
        return h("li", { "data-ref": turn[k] }, `${k} `, h("code", {}, turn[k]), " ",
          text === null || text === undefined ? h("span", { class: "badge" }, "not stored here")
            : h("details", {}, h("summary", {}, `stored, ${count(text.length)} characters`), h("pre", {}, text)));
      })) : h("p", {}, "no content references")));
}

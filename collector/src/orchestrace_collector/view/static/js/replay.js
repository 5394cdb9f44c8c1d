// Replay: the events in time order, one step each; what was going on after step k.

import { h, replaceChildren } from "./dom.js";
import { count, seconds, tokensOf } from "./format.js";
import { DECISION } from "./palette.js";
import { laneName } from "./lanes.js";
import { setParams } from "./router.js";
import { renderTimeline } from "./timeline.js";

// After step k (the k-th event in time order, 0-based): the activations busy at its time, the last
// decision, the messages sent whose recipient has not acted since, and the model calls finished so far.
export function replayState(episode, k) {
  const steps = episode.timeline;
  const event = steps[k];
  const now = event.t;
  const active = episode.lanes.filter((l) => l.start <= now && now < l.end);
  let decision = null;
  for (let i = 0; i <= k; i++) if (steps[i].type === "orchestrator_decision") decision = steps[i];
  const inFlight = [];
  for (let i = 0; i <= k; i++) {
    const sent = steps[i];
    if (sent.type !== "message") continue;
    const target = episode.resolve(sent.to, sent.to_activation, sent.t);
    const answered = target && steps.slice(i + 1, k + 1).some((e) => e.lane === target.key);
    if (!answered) inFlight.push({ event: sent, target });
  }
  const done = episode.turns.filter((t) => (t.t_end ?? t.t) <= now);
  return {
    step: k, event, now, active, decision, inFlight,
    turns: done.length, tokens: done.reduce((sum, t) => sum + tokensOf(t), 0),
    toolCalls: steps.slice(0, k + 1).filter((e) => e.type === "tool_call").length,
    messages: steps.slice(0, k + 1).filter((e) => e.type === "message").length,
  };
}

function describe(event) {
  const what = event.type === "orchestrator_decision"
    ? `decision ${DECISION[event.decision]?.code || ""} ${event.decision || event.label || ""}`
    : event.type;
  return `${event.id}: ${what} by ${event.agent}${event.to ? ` to ${event.to}` : ""}${event.tool ? ` (tool ${event.tool})` : ""} at ${seconds(event.t)}`;
}

export function renderReplay(main, episode, params, routeParts) {
  const steps = episode.timeline;
  let k = Math.min(steps.length - 1, Math.max(0, Number(params.get("step") || 0)));
  let playing = null;
  const slider = h("input", { type: "range", id: "scrubber", min: 0, max: steps.length - 1, value: k, "aria-label": "Replay step" });
  const panel = h("section", { class: "replay-state", "aria-live": "polite" });
  const timelineBox = h("div", { class: "timeline" });
  const playButton = h("button", { type: "button", id: "play" }, "Play");
  const controls = h("div", { class: "replay-controls", role: "toolbar", "aria-label": "Replay controls" },
    h("button", { type: "button", onclick: () => go(0) }, "First"),
    h("button", { type: "button", id: "step-back", onclick: () => go(k - 1) }, "Step back"),
    playButton,
    h("button", { type: "button", id: "step-forward", onclick: () => go(k + 1) }, "Step forward"),
    h("button", { type: "button", onclick: () => go(steps.length - 1) }, "Last"),
    h("label", { for: "scrubber", class: "sr-only" }, "Step"), slider);
  replaceChildren(main, controls, panel, timelineBox);
  const timeline = renderTimeline(timelineBox, episode, { now: steps[k].t, label: "Replay timeline" });

  function show() {
    const state = replayState(episode, k);
    slider.value = k;
    slider.setAttribute("aria-valuetext", `step ${k + 1} of ${steps.length}: ${describe(state.event)}`);
    panel.dataset.step = String(k);
    panel.dataset.active = JSON.stringify(state.active.map((l) => l.key));
    panel.dataset.tokens = String(state.tokens);
    replaceChildren(panel,
      h("p", { class: "current" }, h("strong", {}, `Step ${k + 1} of ${steps.length}: `), describe(state.event)),
      h("dl", {},
        h("dt", {}, "Active agents"), h("dd", { id: "replay-active" }, state.active.length ? state.active.map(laneName).join(", ") : "none"),
        h("dt", {}, "Last decision"), h("dd", { id: "replay-decision", "data-event-id": state.decision ? state.decision.id : "" }, state.decision ? describe(state.decision) : "none yet"),
        h("dt", {}, "Messages in flight"), h("dd", { id: "replay-messages", "data-count": state.inFlight.length },
          state.inFlight.length ? state.inFlight.map((m) => `${m.event.id} ${m.event.agent} to ${m.target ? laneName(m.target) : m.event.to}`).join("; ") : "none"),
        h("dt", {}, "So far"), h("dd", { id: "replay-costs" },
          `${count(state.turns)} model calls, ${count(state.tokens)} tokens, ${count(state.toolCalls)} tool calls, ${count(state.messages)} messages, ${seconds(state.now)} elapsed`)));
    timeline.update({ now: state.now });
    setParams(routeParts, { step: k });
  }

  function go(next) {
    k = Math.min(steps.length - 1, Math.max(0, next));
    if (k === steps.length - 1) stop();
    show();
  }

  function stop() {
    if (playing) clearInterval(playing);
    playing = null;
    playButton.textContent = "Play";
  }

  playButton.addEventListener("click", () => {
    if (playing) return stop();
    if (k === steps.length - 1) k = 0;
    playButton.textContent = "Pause";
    playing = setInterval(() => go(k + 1), 500);
    return null;
  });
  slider.addEventListener("input", () => go(Number(slider.value)));
  main.addEventListener("keydown", (event) => {
    if (event.target === slider || event.target.tagName === "INPUT") return;
    if (event.key === "." || event.key === "l") go(k + 1);
    if (event.key === "," || event.key === "j") go(k - 1);
  });
  show();
  return { stop };
}

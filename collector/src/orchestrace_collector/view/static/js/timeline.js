// The timeline: time on x, one row per agent activation (grouped by agent, foldable), busy spans, marks
// for model calls, tool calls, messages and decisions, arrows between rows. Zoom and pan redraw only what
// is in view.

import { h, s, replaceChildren } from "./dom.js";
import { seconds, tokensOf } from "./format.js";
import { ARROW, DECISION, KIND, shapePath } from "./palette.js";
import { laneName } from "./lanes.js";

const LABEL_WIDTH = 210;
const ROW = 30;
const AXIS = 26;

function niceStep(span) {
  const raw = span / 8;
  const power = 10 ** Math.floor(Math.log10(raw || 1e-9));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= raw) || power * 10;
}

function rowsOf(episode, folded) {
  const rows = [];
  for (const agent of episode.agents) {
    const lanes = episode.lanes.filter((l) => l.agent === agent);
    if (folded.has(agent) && lanes.length > 1) {
      rows.push({ agent, lanes, folded: true, first: true, many: true });
    } else {
      lanes.forEach((lane, i) => rows.push({ agent, lanes: [lane], folded: false, first: i === 0, many: lanes.length > 1 }));
    }
  }
  return rows;
}

function turnTitle(turn, extra) {
  const parts = [`model call by ${turn.agent}${turn.activation ? ` #${turn.activation}` : ""}`];
  if (turn.model) parts.push(`model ${turn.model}`);
  parts.push(`${seconds(turn.t)} to ${seconds(turn.t_end ?? turn.t)}`, `${tokensOf(turn)} tokens`);
  if (turn.tainted) parts.push("tainted: its prompt held untrusted content");
  if (turn.error) parts.push("failed");
  if (extra) parts.push(extra);
  return parts.join(", ");
}

function eventTitle(event) {
  const parts = [`${event.id}: ${event.type}`];
  if (event.decision || event.label) parts.push(`${DECISION[event.decision]?.code || ""} ${event.decision || event.label}`.trim());
  if (event.tool) parts.push(`tool ${event.tool}`);
  if (event.to) parts.push(`to ${event.to}`);
  if (event.handoff) parts.push("handoff");
  if (event.reason) parts.push(`reason ${event.reason}`);
  parts.push(`by ${event.agent}`, `at ${seconds(event.t)}`);
  if (event.trusted === false) parts.push("untrusted content");
  if (event.severity) parts.push(`severity ${event.severity}`);
  if (event.error) parts.push(`error ${event.error_type || ""}`.trim());
  return parts.join(", ");
}

export function arrowTitle(arrow, episode) {
  const from = episode.laneByKey.get(arrow.from);
  const to = episode.laneByKey.get(arrow.to);
  return `${ARROW[arrow.kind].label}: ${from ? laneName(from) : "?"} to ${to ? laneName(to) : "?"} at ${seconds(arrow.t1)} (${arrow.id})`;
}

// options: { turnStyle(turn) -> {fill, title, sign} | null, now, highlight: Set of event ids, end,
//            onTurn(turn), label }
export function renderTimeline(container, episode, options = {}) {
  const state = { t0: 0, t1: options.end || episode.end || 1, folded: new Set(options.folded || []), options };
  const svg = s("svg", { class: "timeline-svg", role: "group", tabindex: "0",
    "aria-label": `${options.label || "Timeline"}: ${episode.lanes.length} activations of ${episode.agents.length} agents. Plus and minus zoom, arrows pan, 0 resets.` });
  const status = h("p", { class: "sr-only", "aria-live": "polite" });
  const toolbar = h("div", { class: "toolbar", role: "toolbar", "aria-label": "Timeline controls" },
    h("button", { type: "button", onclick: () => zoom(0.5) }, "Zoom in"),
    h("button", { type: "button", onclick: () => zoom(2) }, "Zoom out"),
    h("button", { type: "button", onclick: () => reset() }, "Reset zoom"),
    h("button", { type: "button", onclick: () => foldAll(true) }, "Fold all to agents"),
    h("button", { type: "button", onclick: () => foldAll(false) }, "Unfold all"));
  const body = h("div", { class: "timeline-body" }, svg);
  replaceChildren(container, toolbar, body, status, legend());

  function x(t) {
    const width = Math.max(360, body.clientWidth - LABEL_WIDTH - 24);
    return LABEL_WIDTH + ((t - state.t0) / (state.t1 - state.t0 || 1)) * width;
  }

  function inView(a, b) {
    return b >= state.t0 && a <= state.t1;
  }

  function draw() {
    const started = performance.now();
    const focused = document.activeElement?.dataset?.agent;
    const rows = rowsOf(episode, state.folded);
    const rowOf = new Map();
    rows.forEach((row, i) => row.lanes.forEach((lane) => rowOf.set(lane.key, i)));
    const y = (i) => AXIS + i * ROW + ROW / 2;
    const width = Math.max(360, body.clientWidth - LABEL_WIDTH - 24);
    const height = AXIS + rows.length * ROW + 8;
    svg.setAttribute("width", LABEL_WIDTH + width + 16);
    svg.setAttribute("height", height);
    svg.setAttribute("viewBox", `0 0 ${LABEL_WIDTH + width + 16} ${height}`);

    const defs = s("defs", {}, Object.entries(ARROW).map(([kind, style]) =>
      s("marker", { id: `head-${kind}-${uid}`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M0,0L10,5L0,10Z", fill: style.colour }))));
    const clip = s("clipPath", { id: `plot-${uid}` }, s("rect", { x: LABEL_WIDTH, y: 0, width: width + 12, height }));
    defs.append(clip);

    const grid = s("g", { class: "axis", "aria-hidden": "true" });
    const step = niceStep(state.t1 - state.t0);
    for (let t = Math.ceil(state.t0 / step) * step; t <= state.t1; t += step) {
      grid.append(s("line", { x1: x(t), x2: x(t), y1: AXIS - 4, y2: height, class: "tick" }),
        s("text", { x: x(t), y: AXIS - 8, "text-anchor": "middle" }, seconds(Number(t.toPrecision(6)))));
    }

    const laneLayer = s("g", { class: "lanes" });
    const labelLayer = s("g", { class: "labels" });
    rows.forEach((row, i) => {
      const top = AXIS + i * ROW;
      laneLayer.append(s("rect", { class: `row-bg ${i % 2 ? "odd" : "even"}`, x: LABEL_WIDTH, y: top, width: width + 12, height: ROW }));
      for (const lane of row.lanes) {
        const turns = lane.turns.length;
        laneLayer.append(s("rect", {
          class: `busy lane${lane.returned ? "" : " open"}`, "data-lane-key": lane.key, "data-agent": lane.agent,
          "data-activation": lane.activation ?? "", x: x(lane.start), y: top + 5, width: Math.max(1, x(lane.end) - x(lane.start)), height: ROW - 10,
        }, s("title", {}, `${laneName(lane)} busy ${seconds(lane.start)} to ${seconds(lane.end)}${lane.returned ? "" : " (no return recorded)"}, ${turns} model calls`)));
      }
      const name = row.folded ? `${row.agent} (${row.lanes.length} activations)` : laneName(row.lanes[0]);
      const toggle = row.many && row.first ? (row.folded ? "\u25B8 " : "\u25BE ") : row.many ? "\u2003" : "";
      const label = s("g", {
        class: "lane-label", tabindex: "0", role: "button", "data-agent": row.agent, "data-row": i,
        "aria-expanded": row.many ? String(!row.folded) : null,
        "aria-label": `${name}${row.many ? (row.folded ? ", folded: Enter unfolds" : ", Enter folds to the agent") : ""}`,
      }, s("rect", { x: 0, y: top, width: LABEL_WIDTH - 6, height: ROW, class: "label-bg" }),
        s("text", { x: 8, y: top + ROW / 2 + 4 }, (toggle + name).slice(0, 34)), s("title", {}, name));
      label.addEventListener("click", () => toggleFold(row.agent));
      label.addEventListener("keydown", (event) => labelKey(event, row.agent, i));
      labelLayer.append(label);
    });

    const marks = s("g", { class: "marks", "clip-path": `url(#plot-${uid})` });
    const future = (t) => options.now !== undefined && options.now !== null && t > options.now + 1e-12;
    for (const turn of episode.turns) {
      const end = turn.t_end ?? turn.t;
      if (!inView(turn.t, end) || !rowOf.has(turn.lane)) continue;
      const style = options.turnStyle ? options.turnStyle(turn) : null;
      const cy = y(rowOf.get(turn.lane));
      const mark = s("rect", {
        class: `mark mark-turn${future(turn.t) ? " future" : ""}${turn.tainted ? " tainted" : ""}`, "data-turn-id": turn.turn_id, "data-lane-key": turn.lane,
        "data-credit-sign": style ? style.sign : null, "data-credit": style ? style.value : null,
        x: x(turn.t), y: cy - 6, width: Math.max(3, x(end) - x(turn.t)), height: 12, rx: 5,
        fill: style ? style.fill : KIND.turn.colour, tabindex: options.onTurn ? "0" : null,
        role: options.onTurn ? "link" : null, "aria-label": turnTitle(turn, style && style.title),
      }, s("title", {}, turnTitle(turn, style && style.title)));
      if (options.onTurn) {
        mark.addEventListener("click", () => options.onTurn(turn));
        mark.addEventListener("keydown", (event) => { if (event.key === "Enter") options.onTurn(turn); });
      }
      marks.append(mark);
    }
    for (const event of episode.events) {
      const end = event.t_end ?? event.t;
      if (!inView(event.t, end) || !rowOf.has(event.lane)) continue;
      const cy = y(rowOf.get(event.lane));
      const cls = `${future(event.t) ? " future" : ""}${options.highlight && options.highlight.has(event.id) ? " highlight" : ""}`;
      const common = { "data-event-id": event.id, "data-lane-key": event.lane, "aria-label": eventTitle(event) };
      let mark = null;
      if (event.type === "tool_call") {
        mark = s("rect", { ...common, class: `mark mark-tool${cls}`, x: x(event.t), y: cy + 2, width: Math.max(3, x(end) - x(event.t)), height: 7, fill: KIND.tool.colour });
      } else if (event.type === "aggregate") {
        mark = s("rect", { ...common, class: `mark mark-aggregate${cls}`, x: x(event.t), y: cy - 11, width: Math.max(3, x(end) - x(event.t)), height: 6, fill: KIND.aggregate.colour });
      } else if (event.type === "message") {
        mark = s("path", { ...common, class: `mark mark-message${cls}`, d: shapePath("circle", x(event.t), cy, 5), fill: KIND.message.colour });
      } else if (event.type === "orchestrator_decision") {
        const kind = DECISION[event.decision] ? event.decision : "other";
        mark = s("path", { ...common, class: `mark decision decision-${kind}${cls}`, "data-decision": kind, d: shapePath(DECISION[kind].shape, x(event.t), cy - 9, 6), fill: KIND.decision.colour });
      } else if (event.type === "human_intervention") {
        mark = s("path", { ...common, class: `mark mark-human${cls}`, d: shapePath("hexagon", x(event.t), cy, 6), fill: KIND.human.colour });
      } else if (event.type === "safety_event") {
        mark = s("path", { ...common, class: `mark mark-safety${cls}`, d: shapePath("cross", x(event.t), cy, 6), stroke: KIND.safety.colour });
      }
      if (mark) {
        mark.append(s("title", {}, eventTitle(event)));
        marks.append(mark);
      }
    }

    const arrows = s("g", { class: "arrows", "clip-path": `url(#plot-${uid})` });
    for (const arrow of episode.arrows) {
      if (!inView(Math.min(arrow.t0, arrow.t1), Math.max(arrow.t0, arrow.t1))) continue;
      if (!rowOf.has(arrow.from) || !rowOf.has(arrow.to) || rowOf.get(arrow.from) === rowOf.get(arrow.to)) continue;
      const style = ARROW[arrow.kind];
      const x0 = x(arrow.t0);
      const x1 = x(arrow.t1);
      const y0 = y(rowOf.get(arrow.from));
      const y1 = y(rowOf.get(arrow.to));
      // Bent apart so that a delegation and the spawn it causes (same moment, same rows) both show.
      const bend = { return: -14, delegate: 30, handoff: 30 }[arrow.kind] ?? 14;
      const path = s("path", {
        class: `arrow arrow-${arrow.kind}${future(arrow.t1) ? " future" : ""}${options.highlight && options.highlight.has(arrow.id) ? " highlight" : ""}`,
        "data-event-id": arrow.id, "data-kind": arrow.kind, "data-from": arrow.from, "data-to": arrow.to,
        d: `M${x0},${y0}C${x0 + bend},${(y0 + y1) / 2} ${x1 + bend},${(y0 + y1) / 2} ${x1},${y1}`,
        stroke: style.colour, "stroke-dasharray": style.dash || null, fill: "none",
        "marker-end": `url(#head-${arrow.kind}-${uid})`, "aria-label": arrowTitle(arrow, episode),
      }, s("title", {}, arrowTitle(arrow, episode)));
      arrows.append(path);
    }

    const overlay = s("g", { class: "overlay" });
    if (options.now !== undefined && options.now !== null && inView(options.now, options.now)) {
      overlay.append(s("line", { class: "cursor", x1: x(options.now), x2: x(options.now), y1: AXIS - 4, y2: height }));
    }
    replaceChildren(svg, defs, grid, laneLayer, arrows, marks, overlay, labelLayer);
    if (focused) {
      const again = svg.querySelector(`.lane-label[data-agent="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
    container.dataset.renderMs = String(Math.round(performance.now() - started));
    container.dataset.rendered = String(Number(container.dataset.rendered || 0) + 1);
  }

  function labelKey(event, agent, index) {
    const labels = [...svg.querySelectorAll(".lane-label")];
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const next = labels[index + (event.key === "ArrowDown" ? 1 : -1)];
      if (next) next.focus();
    } else if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      toggleFold(agent);
    }
  }

  function toggleFold(agent) {
    if (episode.lanes.filter((l) => l.agent === agent).length < 2) return;
    if (state.folded.has(agent)) state.folded.delete(agent); else state.folded.add(agent);
    status.textContent = `${agent} ${state.folded.has(agent) ? "folded" : "unfolded"}`;
    draw();
  }

  function foldAll(fold) {
    state.folded = new Set(fold ? episode.agents : []);
    draw();
  }

  function zoom(factor, around) {
    const centre = around ?? (state.t0 + state.t1) / 2;
    const span = Math.max((state.t1 - state.t0) * factor, (options.end || episode.end || 1) * 1e-4);
    state.t0 = centre - (centre - state.t0) * (span / (state.t1 - state.t0));
    state.t1 = state.t0 + span;
    status.textContent = `showing ${seconds(Math.max(0, state.t0))} to ${seconds(state.t1)}`;
    draw();
  }

  function pan(fraction) {
    const shift = (state.t1 - state.t0) * fraction;
    state.t0 += shift;
    state.t1 += shift;
    draw();
  }

  function reset() {
    state.t0 = 0;
    state.t1 = options.end || episode.end || 1;
    draw();
  }

  function timeAt(clientX) {
    const box = svg.getBoundingClientRect();
    const width = Math.max(360, body.clientWidth - LABEL_WIDTH - 24);
    return state.t0 + ((clientX - box.left - LABEL_WIDTH) / width) * (state.t1 - state.t0);
  }

  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    zoom(event.deltaY > 0 ? 1.25 : 0.8, timeAt(event.clientX));
  }, { passive: false });
  let dragging = null;
  svg.addEventListener("pointerdown", (event) => {
    if (event.target.closest(".lane-label, .mark")) return;
    dragging = { x: event.clientX, t0: state.t0, t1: state.t1 };
  });
  window.addEventListener("pointerup", () => { dragging = null; });
  svg.addEventListener("pointermove", (event) => {
    if (!dragging) return;
    const width = Math.max(360, body.clientWidth - LABEL_WIDTH - 24);
    const shift = ((dragging.x - event.clientX) / width) * (dragging.t1 - dragging.t0);
    state.t0 = dragging.t0 + shift;
    state.t1 = dragging.t1 + shift;
    draw();
  });
  svg.addEventListener("keydown", (event) => {
    if (event.target !== svg) return;
    const actions = { "+": () => zoom(0.5), "=": () => zoom(0.5), "-": () => zoom(2), 0: reset,
      ArrowLeft: () => pan(-0.2), ArrowRight: () => pan(0.2) };
    if (actions[event.key]) {
      event.preventDefault();
      actions[event.key]();
    }
  });
  const resize = () => { if (container.isConnected) draw(); };
  window.addEventListener("resize", resize);

  const uid = Math.random().toString(36).slice(2, 8);
  draw();
  return {
    update(next) {
      Object.assign(options, next);
      draw();
    },
    get folded() { return state.folded; },
    destroy() { window.removeEventListener("resize", resize); },
  };
}

function legend() {
  const item = (icon, text) => h("li", {}, s("svg", { width: 22, height: 16, "aria-hidden": "true" }, icon), text);
  return h("ul", { class: "legend", "aria-label": "Legend" },
    item(s("rect", { x: 2, y: 3, width: 18, height: 10, rx: 5, fill: KIND.turn.colour }), "model call"),
    item(s("rect", { x: 2, y: 5, width: 18, height: 6, fill: KIND.tool.colour }), "tool call"),
    item(s("path", { d: shapePath("circle", 11, 8, 5), fill: KIND.message.colour }), "message"),
    item(s("rect", { x: 2, y: 5, width: 18, height: 6, fill: KIND.aggregate.colour }), "aggregate"),
    ...Object.entries(DECISION).map(([kind, d]) => item(
      s("path", { d: shapePath(d.shape, 11, 8, 6), fill: KIND.decision.colour, stroke: kind === "other" ? KIND.decision.colour : "#000", "stroke-width": kind === "other" ? 2 : 0.8 }),
      `${d.code ? `${d.code} ` : ""}${kind === "other" ? "other decision" : kind}`)),
    ...Object.entries(ARROW).map(([kind, style]) => item(
      s("line", { x1: 1, y1: 8, x2: 21, y2: 8, stroke: style.colour, "stroke-width": 2, "stroke-dasharray": style.dash || null }), style.label)),
    item(s("path", { d: shapePath("hexagon", 11, 8, 6), fill: KIND.human.colour }), "human intervention"),
    item(s("path", { d: shapePath("cross", 11, 8, 6), stroke: KIND.safety.colour, "stroke-width": 2 }), "safety event"),
  );
}


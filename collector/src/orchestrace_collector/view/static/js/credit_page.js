// Credit: turns coloured by the reward credited to them, under any of the project's strategies
// (recomputed from the written trace by the collector's own credit code), and the team reward's split
// over the agents' activations.

import { errorBox, h, replaceChildren, s } from "./dom.js";
import { num } from "./format.js";
import { creditColour, creditSign } from "./palette.js";
import { laneKey, laneName } from "./lanes.js";
import { episodeHref, navigate, setParams } from "./router.js";
import { renderTimeline } from "./timeline.js";

export function renderCredit(main, episode, credit, params, routeParts) {
  if (!credit || credit.error) {
    replaceChildren(main, errorBox("No credit to show", credit ? credit.error : "This episode has no credit data."));
    return;
  }
  const strategy = credit.strategies.includes(params.get("strategy")) ? params.get("strategy") : "causal";
  const chosen = credit.by_strategy[strategy];
  const totalOf = (shares) => Object.values(shares || {}).reduce((a, b) => a + b, 0);
  const scale = Math.max(1e-12, ...Object.values(chosen.turns).map((c) => Math.abs(totalOf(c))));
  const switcher = h("fieldset", { class: "strategies" }, h("legend", {}, "Credit strategy"),
    credit.strategies.map((name) => h("label", {}, h("input", {
      type: "radio", name: "strategy", value: name, checked: name === strategy,
      onchange: () => {
        setParams(routeParts, { strategy: name });
        renderCredit(main, episode, credit, new URLSearchParams({ strategy: name }), routeParts);
      },
    }), ` ${name}`)));
  const timelineBox = h("div", { class: "timeline" });
  const agents = [...chosen.agents].sort((a, b) => b[2] - a[2]);
  const most = Math.max(1e-12, ...agents.map((a) => Math.abs(a[2])));
  const split = h("table", { class: "agent-split" },
    h("caption", {}, `Team reward split over agent activations (${strategy})`),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "activation"), h("th", { scope: "col" }, "credit"), h("th", { scope: "col" }, ""))),
    h("tbody", {}, agents.map(([agent, activation, total]) => {
      const lane = episode.laneByKey.get(laneKey(agent, activation));
      return h("tr", { "data-lane-key": laneKey(agent, activation), "data-credit": total },
        h("td", {}, lane ? laneName(lane) : agent), h("td", { class: "num" }, num(total)),
        h("td", {}, s("svg", { width: 160, height: 12, role: "img", "aria-label": `${num(total)}` },
          s("rect", { x: 0, y: 1, height: 10, width: (150 * Math.abs(total)) / most, fill: creditColour(total, most) }))));
    })));
  const gradient = h("p", { class: "credit-scale" }, "Less ",
    s("svg", { width: 200, height: 14, role: "img", "aria-label": `credit scale from ${num(-scale)} (orange) through 0 (grey) to ${num(scale)} (blue)` },
      Array.from({ length: 21 }, (_, i) => s("rect", { x: i * 9.5, y: 0, width: 10, height: 14, fill: creditColour(((i - 10) / 10) * scale, scale) }))),
    ` more credited reward (largest ${num(scale)} per turn)`);
  replaceChildren(main, switcher, gradient, timelineBox, split);
  renderTimeline(timelineBox, episode, {
    label: "Credit timeline",
    turnStyle: (turn) => {
      const shares = chosen.turns[turn.turn_id] || {};
      const value = totalOf(shares);
      const channels = Object.entries(shares).map(([k, v]) => `${k} ${num(v)}`).join(", ");
      return { fill: creditColour(value, scale), sign: creditSign(value), value,
        title: `credit ${num(value)} (${strategy})${channels ? `: ${channels}` : ""}` };
    },
    onTurn: (turn) => { navigate(episodeHref(episode.trace.trace_id, "turn", { turn: turn.turn_id })); },
  });
}

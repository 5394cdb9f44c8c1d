// One episode: its header (task, outcome, costs, validation problems) and its tabs: timeline, replay,
// credit, and the turn pages.

import { errorBox, h, replaceChildren } from "./dom.js";
import { count, num, seconds } from "./format.js";
import { buildEpisode } from "./lanes.js";
import { episodeHref, navigate, routeHref } from "./router.js";
import { fetchCredit, fetchProblems, fetchTrace, fetchTurn } from "./source.js";
import { renderTimeline } from "./timeline.js";
import { renderReplay } from "./replay.js";
import { renderCredit } from "./credit_page.js";
import { renderTurn } from "./turn_page.js";

const TABS = [["timeline", "Timeline"], ["replay", "Replay"], ["credit", "Credit"], ["turns", "Model calls"]];

function turnList(episode) {
  if (!episode.turns.length) return h("p", {}, "This episode has no model calls.");
  return h("table", { class: "turns" },
    h("thead", {}, h("tr", {}, ["model call", "agent", "model", "start", "tokens", "credited", "flags"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, episode.turns.map((t) => h("tr", {},
      h("td", {}, h("a", { href: episodeHref(episode.trace.trace_id, "turn", { turn: t.turn_id }) }, t.turn_id)),
      h("td", {}, `${t.agent}${t.activation ? ` #${t.activation}` : ""}`), h("td", {}, t.model || ""),
      h("td", { class: "num" }, seconds(t.t)), h("td", { class: "num" }, count((t.input_tokens || 0) + (t.output_tokens || 0))),
      h("td", { class: "num" }, num(t.reward)),
      h("td", {}, ["tainted", "truncated", "prompt_incomplete", "error"].filter((f) => t[f]).join(", "))))));
}

export async function renderEpisode(main, parts, params) {
  const [, traceId, tab = "timeline"] = parts;
  const payload = await fetchTrace(traceId);
  if (!payload) {
    replaceChildren(main, errorBox("Episode not found", `No episode ${traceId} in these directories (yet).`));
    return null;
  }
  const { trace, turns, outcome } = payload;
  const header = h("header", { class: "episode-header" },
    h("p", { class: "crumbs" }, h("a", { href: routeHref(["episodes"], { task: trace.task_id }) }, `task ${trace.task_id}`)),
    h("h1", {}, `Episode ${trace.trace_id}`),
    h("p", { class: "facts-line" },
      `outcome ${num(outcome ?? null)} · ${count(turns.length)} model calls · ${count(trace.costs?.tokens)} tokens · `
      + `${seconds(trace.costs?.wall_clock_s)} wall clock · parallelism ${num(trace.metrics?.parallelism_efficiency ?? null)} · `
      + `revision ${trace.metrics?.revision ?? 0}${trace.topology ? ` · ${trace.topology}` : ""}`),
    h("nav", { class: "tabs", "aria-label": "Episode views" }, TABS.map(([name, label]) =>
      h("a", { href: episodeHref(traceId, name), "aria-current": name === tab ? "page" : null }, label))));
  const area = h("div", { class: "tab" });
  const warning = h("div", { class: "validation" });
  replaceChildren(main, header, warning, area);
  let episode;
  try {
    episode = buildEpisode(trace, turns);
  } catch (error) {
    area.append(errorBox("This trace cannot be drawn", String(error.message || error)));
  }
  const shown = episode ? await showTab(area, episode, tab, traceId, parts, params) : null;
  // Asked for once the page is drawn: validating a large trace takes the server seconds.
  const { problems } = (await fetchProblems(traceId)) || { problems: [] };
  if (problems.length) {
    warning.append(errorBox(`This trace fails validation (${problems.length} problems)`, problems.slice(0, 8).join("; ")));
  }
  return shown;
}

async function showTab(area, episode, tab, traceId, parts, params) {
  if (tab === "replay") return renderReplay(area, episode, params, parts);
  if (tab === "credit") {
    renderCredit(area, episode, await fetchCredit(traceId), params, parts);
  } else if (tab === "turn") {
    renderTurn(area, episode, await fetchTurn(traceId, params.get("turn") || ""));
  } else if (tab === "turns") {
    replaceChildren(area, turnList(episode));
  } else {
    const box = h("div", { class: "timeline" });
    replaceChildren(area, box);
    renderTimeline(box, episode, {
      onTurn: (turn) => { navigate(episodeHref(traceId, "turn", { turn: turn.turn_id })); },
    });
  }
  return null;
}

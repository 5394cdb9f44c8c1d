// Two rollouts of one task side by side: timelines on one time scale from their starts, outcomes, and the
// first point where their decisions differ.

import { errorBox, h, replaceChildren } from "./dom.js";
import { num, seconds } from "./format.js";
import { buildEpisode, decisionKey } from "./lanes.js";
import { episodeHref } from "./router.js";
import { fetchProblems, fetchTrace } from "./source.js";
import { renderTimeline } from "./timeline.js";

function decisions(episode) {
  return episode.timeline.filter((e) => e.type === "orchestrator_decision").map((e) => ({ event: e, key: decisionKey(episode, e) }));
}

// The first position where the two decision sequences differ (one ending early counts), or null.
export function firstDifference(a, b) {
  const da = decisions(a);
  const db = decisions(b);
  for (let i = 0; i < Math.max(da.length, db.length); i++) {
    if (!da[i] || !db[i] || da[i].key !== db[i].key) return { index: i, a: da[i] || null, b: db[i] || null };
  }
  return null;
}

export async function renderCompare(main, params) {
  const ids = [params.get("a"), params.get("b")];
  if (!ids[0] || !ids[1]) {
    replaceChildren(main, errorBox("Pick two episodes", "Select two rollouts of one task on the episodes page."));
    return;
  }
  const payloads = await Promise.all(ids.map(fetchTrace));
  const checks = await Promise.all(ids.map(fetchProblems));
  const missing = ids.filter((id, i) => !payloads[i]);
  if (missing.length) {
    replaceChildren(main, errorBox("Episode not found", `No episode ${missing.join(", ")} in these directories.`));
    return;
  }
  const episodes = payloads.map((p) => buildEpisode(p.trace, p.turns));
  const end = Math.max(...episodes.map((e) => e.end));
  const diff = firstDifference(episodes[0], episodes[1]);
  const side = (episode, payload, check, which) => {
    const trace = episode.trace;
    const mine = diff ? diff[which] : null;
    const box = h("div", { class: "timeline" });
    const section = h("section", { class: "compare-side", "data-trace-id": trace.trace_id },
      h("h2", {}, h("a", { href: episodeHref(trace.trace_id) }, trace.trace_id)),
      h("p", {}, `outcome ${num(payload.outcome ?? null)}; rewards ${Object.entries(trace.rewards || {}).filter(([k]) => !k.startsWith("credit:")).map(([k, v]) => `${k} ${num(v)}`).join(", ") || "none"}; wall clock ${seconds(trace.costs?.wall_clock_s)}`),
      check && check.problems.length ? errorBox("This trace fails validation", check.problems.slice(0, 5).join("; ")) : null,
      box);
    return { section, box, highlight: new Set(mine ? [mine.event.id] : []) };
  };
  const sides = [side(episodes[0], payloads[0], checks[0], "a"), side(episodes[1], payloads[1], checks[1], "b")];
  const describe = (d) => (d ? `${d.key} (${d.event.id} at ${seconds(d.event.t)})` : "no further decision");
  const summary = diff
    ? h("div", { class: "first-difference", id: "first-difference", "data-index": diff.index,
      "data-a": diff.a ? diff.a.event.id : "", "data-b": diff.b ? diff.b.event.id : "" },
    h("strong", {}, `First different decision (decision ${diff.index + 1}): `),
    h("ul", {}, h("li", {}, `A: ${describe(diff.a)}`), h("li", {}, `B: ${describe(diff.b)}`)))
    : h("div", { class: "first-difference", id: "first-difference", "data-index": "" }, "The two rollouts made the same decisions in the same order.");
  const sameTask = episodes[0].trace.task_id === episodes[1].trace.task_id;
  replaceChildren(main, h("h1", {}, `Compare rollouts of task ${episodes[0].trace.task_id}`),
    sameTask ? null : h("p", { class: "warning", role: "note" }, "These episodes belong to different tasks."),
    summary, sides[0].section, sides[1].section);
  sides.forEach((sd, i) => renderTimeline(sd.box, episodes[i], { end, highlight: sd.highlight, label: `Timeline of rollout ${i ? "B" : "A"}` }));
}

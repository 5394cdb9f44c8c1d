// The episodes page: every episode (latest revision), grouped by task (the GRPO group), sorted, filtered
// and paged in the browser; the rows come once, then only those that changed.

import { errorBox, h, replaceChildren, s } from "./dom.js";
import { count, num, seconds } from "./format.js";
import { fetchEpisodes } from "./source.js";
import { episodeHref, navigate, routeHref, setParams } from "./router.js";

export const PAGE_SIZE = 100;
const rows = new Map();
let known = 0;
let directories = [];

export async function loadEpisodes() {
  const answer = await fetchEpisodes(known);
  for (const row of answer.episodes) rows.set(row.trace_id, row);
  known = answer.generation;
  directories = answer.directories || [];
  return answer.episodes.length;
}

export function knownGeneration() {
  return known;
}

export function episodeRow(traceId) {
  return rows.get(traceId) || null;
}

export function rowsOfTask(taskId) {
  return [...rows.values()].filter((r) => r.task_id === taskId);
}

const SORTS = {
  outcome: (r) => r.outcome ?? -Infinity,
  tokens: (r) => r.tokens ?? 0,
  wall_clock: (r) => r.wall_clock_s ?? 0,
  parallelism: (r) => r.parallelism ?? 0,
  turns: (r) => r.turns ?? 0,
  events: (r) => r.events ?? 0,
  newest: (r) => r.seq,
};
const OUTCOMES = {
  any: () => true,
  positive: (r) => r.outcome > 0,
  zero: (r) => r.outcome === 0,
  negative: (r) => r.outcome < 0,
  none: (r) => r.outcome === null || r.outcome === undefined,
};
const FLAGS = ["incomplete", "truncated", "rejected_rewards", "conflicts"];

function filtered(params) {
  const task = (params.get("task") || "").toLowerCase();
  const agent = (params.get("agent") || "").toLowerCase();
  const flag = params.get("flag") || "";
  const outcome = OUTCOMES[params.get("outcome")] || OUTCOMES.any;
  const key = SORTS[params.get("sort")] || SORTS.outcome;
  const direction = params.get("desc") === "0" ? 1 : -1;
  const list = [...rows.values()].filter((r) =>
    (!task || r.task_id.toLowerCase().includes(task))
    && (!agent || r.agents.some((a) => a.toLowerCase().includes(agent)))
    && (!flag || r.flags.includes(flag))
    && outcome(r));
  // Grouped by task; the chosen key orders the rows inside each group.
  list.sort((a, b) => {
    if (a.task_id !== b.task_id) return a.task_id < b.task_id ? -1 : 1;
    const ka = key(a);
    const kb = key(b);
    return (ka < kb ? -1 : ka > kb ? 1 : 0) * direction || (a.trace_id < b.trace_id ? -1 : 1);
  });
  return list;
}

// A small bar chart of a group's outcomes (distinct values, or ten bins when there are many).
function distribution(list) {
  const values = list.map((r) => r.outcome).filter((v) => v !== null && v !== undefined);
  const missing = list.length - values.length;
  const distinct = [...new Set(values)].sort((a, b) => a - b);
  let bins;
  if (distinct.length <= 10) {
    bins = distinct.map((v) => ({ label: num(v), n: values.filter((x) => x === v).length }));
  } else {
    const lo = distinct[0];
    const width = (distinct[distinct.length - 1] - lo) / 10;
    bins = Array.from({ length: 10 }, (_, i) => ({ label: `${num(lo + i * width)} to ${num(lo + (i + 1) * width)}`, n: 0 }));
    for (const v of values) bins[Math.min(9, Math.floor((v - lo) / width))].n += 1;
  }
  if (missing) bins.push({ label: "no outcome", n: missing });
  const most = Math.max(1, ...bins.map((b) => b.n));
  const text = bins.map((b) => `${b.label}: ${b.n}`).join("; ");
  return s("svg", { class: "distribution", width: bins.length * 14 + 4, height: 26, role: "img", "aria-label": `outcomes ${text}` },
    s("title", {}, `outcomes ${text}`),
    bins.map((b, i) => s("rect", { x: 2 + i * 14, y: 24 - (22 * b.n) / most, width: 11, height: (22 * b.n) / most, class: b.label === "no outcome" ? "bin-none" : "bin" },
      s("title", {}, `${b.label}: ${b.n}`))));
}

function flagsCell(flags) {
  return h("td", { class: "flags" }, flags.map((f) => h("span", { class: `flag flag-${f}` }, f)));
}

export function renderEpisodes(main, params) {
  if (rows.size === 0) {
    const problems = directories.filter((d) => d.error);
    const where = directories.map((d) => d.path).join(", ");
    replaceChildren(main, problems.length
      ? errorBox("Cannot read the output directory", problems.map((d) => d.error).join("; "))
      : errorBox("No episodes yet", `No traces in ${where || "the directories given"} yet. When a collector (orchestrace collect --out DIR) writes one there, it appears here without a reload.`));
    return;
  }
  const focusedName = document.activeElement?.name;
  const state = Object.fromEntries(params.entries());
  const list = filtered(params);
  const pages = Math.max(1, Math.ceil(list.length / PAGE_SIZE));
  const page = Math.min(pages - 1, Math.max(0, Number(params.get("page") || 0)));
  const shown = list.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
  const groups = new Map();
  for (const row of list) {
    if (!groups.has(row.task_id)) groups.set(row.task_id, []);
    groups.get(row.task_id).push(row);
  }
  const go = (changes) => {
    const next = { ...state, ...changes };
    setParams(["episodes"], next);
    renderEpisodes(main, new URLSearchParams(Object.entries(next).filter(([, v]) => v !== "" && v !== undefined)));
  };
  const input = (name, label) => h("label", {}, `${label} `, h("input", {
    type: "search", name, value: state[name] || "", oninput: (e) => go({ [name]: e.target.value, page: 0 }) }));
  const select = (name, label, options) => h("label", {}, `${label} `, h("select", { name, onchange: (e) => go({ [name]: e.target.value, page: 0 }) },
    options.map(([value, text]) => h("option", { value, selected: (state[name] || options[0][0]) === value }, text))));
  const selected = new Set();
  const compare = h("button", { type: "button", disabled: true, onclick: () => {
    const [a, b] = [...selected];
    navigate(routeHref(["compare"], { a, b }));
  } }, "Compare the 2 selected");
  const controls = h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
    input("task", "Task"), input("agent", "Agent"),
    select("outcome", "Outcome", [["any", "any"], ["positive", "> 0"], ["zero", "0"], ["negative", "< 0"], ["none", "none"]]),
    select("flag", "Flag", [["", "any"], ...FLAGS.map((f) => [f, f])]),
    select("sort", "Sort by", Object.keys(SORTS).map((k) => [k, k.replace("_", " ")])),
    select("desc", "Order", [["1", "descending"], ["0", "ascending"]]),
    compare);
  const pager = h("nav", { class: "pager", "aria-label": "Pages" },
    h("button", { type: "button", disabled: page === 0, onclick: () => go({ page: page - 1 }) }, "Previous page"),
    h("span", { class: "page-of" }, `page ${page + 1} of ${pages} (${count(list.length)} of ${count(rows.size)} episodes)`),
    h("button", { type: "button", disabled: page >= pages - 1, onclick: () => go({ page: page + 1 }) }, "Next page"));
  const body = [];
  let current = null;
  for (const row of shown) {
    if (row.task_id !== current) {
      current = row.task_id;
      const group = groups.get(current);
      const ranked = [...group].filter((r) => r.outcome !== null && r.outcome !== undefined).sort((a, b) => b.outcome - a.outcome);
      body.push(h("tr", { class: "group", "data-task": current },
        h("th", { colspan: 10, scope: "rowgroup" },
          h("span", { class: "task" }, `task ${current}`), ` ${group.length} rollouts `, distribution(group),
          ranked.length >= 2 && ranked[0].outcome !== ranked[ranked.length - 1].outcome
            ? h("a", { href: routeHref(["compare"], { a: ranked[0].trace_id, b: ranked[ranked.length - 1].trace_id }) }, " compare best and worst")
            : null)));
    }
    const box = h("input", { type: "checkbox", "aria-label": `select ${row.trace_id} for comparison`, onchange: (e) => {
      if (e.target.checked) selected.add(row.trace_id); else selected.delete(row.trace_id);
      compare.disabled = selected.size !== 2;
    } });
    body.push(h("tr", { class: "episode", "data-trace-id": row.trace_id },
      h("td", {}, box),
      h("td", {}, h("a", { href: episodeHref(row.trace_id) }, row.trace_id)),
      h("td", { class: "num" }, num(row.outcome)),
      h("td", {}, Object.entries(row.rewards).map(([k, v]) => `${k} ${num(v)}`).join(", ")),
      h("td", { class: "num" }, count(row.turns)),
      h("td", { class: "num" }, count(row.tokens)),
      h("td", { class: "num" }, seconds(row.wall_clock_s)),
      h("td", { class: "num" }, num(row.parallelism)),
      flagsCell(row.flags),
      h("td", {}, row.agents.join(", "))));
  }
  const table = h("table", { class: "episodes" },
    h("caption", { class: "sr-only" }, "Episodes grouped by task"),
    h("thead", {}, h("tr", {}, ["", "episode", "outcome", "rewards", "turns", "tokens", "wall clock", "parallelism", "flags", "agents"]
      .map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, body));
  replaceChildren(main, h("h1", {}, "Episodes"), controls, pager, table);
  const again = focusedName ? controls.querySelector(`[name="${focusedName}"]`) : null;
  if (again) {
    again.focus();
    if (again.type === "search") again.setSelectionRange(again.value.length, again.value.length);
  }
}

// An episode as the timeline draws it: one lane per agent activation, keyed by the event fields (agent,
// activation), busy spans, marks, and arrows between lanes. Pure data, no drawing.

export function laneKey(agent, activation) {
  return JSON.stringify([String(agent), Number.isInteger(activation) ? activation : null]);
}

function byStart(a, b) {
  return a.t - b.t || a.index - b.index;
}

export function buildEpisode(trace, turns) {
  const events = (trace.events || []).map((event, index) => ({ ...event, index }));
  const byId = new Map(events.map((e) => [e.id, e]));
  const lanes = new Map();

  function lane(agent, activation) {
    const key = laneKey(agent, activation);
    if (!lanes.has(key)) {
      lanes.set(key, {
        key, agent: String(agent), activation: Number.isInteger(activation) ? activation : null,
        start: Infinity, end: -Infinity, events: [], turns: [], returned: false,
      });
    }
    return lanes.get(key);
  }

  // A tool's result belongs to the activation that called the tool (the call's `return` edge).
  const callOf = new Map();
  for (const edge of trace.edges || []) {
    const src = byId.get(edge.src);
    const dst = byId.get(edge.dst);
    if (edge.type === "return" && src && dst && src.type === "tool_call" && dst.type === "tool_result") {
      callOf.set(dst.id, src);
    }
  }
  for (const event of events) {
    const owner = Number.isInteger(event.activation) ? event : callOf.get(event.id) || event;
    const home = lane(owner.agent, owner.activation);
    event.lane = home.key;
    home.events.push(event);
    home.start = Math.min(home.start, event.t_start ?? event.t);
    home.end = Math.max(home.end, event.t_end ?? event.t);
    if (event.type === "return" && Number.isInteger(event.activation)) {
      home.returned = true;
      if (event.t_start !== undefined) home.start = Math.min(home.start, event.t_start);
    }
  }
  const orderedTurns = [...(turns || [])].sort((a, b) => a.t - b.t);
  for (const turn of orderedTurns) {
    const home = lane(turn.agent, turn.activation);
    turn.lane = home.key;
    home.turns.push(turn);
    home.start = Math.min(home.start, turn.t);
    home.end = Math.max(home.end, turn.t_end ?? turn.t);
  }

  // Labels as `to` / `from` write them: `name#k` when a name has several activations, else the name.
  // Resolved by lookup, never by parsing names, so any agent name works.
  const activationsOf = new Map();
  for (const item of lanes.values()) {
    if (item.activation === null) continue;
    if (!activationsOf.has(item.agent)) activationsOf.set(item.agent, []);
    activationsOf.get(item.agent).push(item);
  }
  const byLabel = new Map();
  for (const [agent, list] of activationsOf) {
    const most = Math.max(...list.map((l) => l.activation));
    for (const item of list) {
      item.label = most > 1 ? `${agent}#${item.activation}` : agent;
      byLabel.set(item.label, item);
    }
  }
  for (const item of lanes.values()) if (!item.label) item.label = item.agent;

  function resolve(name, activation, t) {
    if (name === undefined || name === null) return null;
    if (Number.isInteger(activation)) return lane(name, activation);
    if (byLabel.has(name)) return byLabel.get(name);
    const list = activationsOf.get(name);
    if (list) return list.find((l) => l.start <= t && t <= l.end) || list[0];
    return lanes.get(laneKey(name, null)) || null;
  }

  const arrows = [];
  function arrow(kind, event, from, to, t0, t1, extra) {
    if (!from || !to || from.key === to.key) return;
    arrows.push({ kind, id: event.id, event, from: from.key, to: to.key, t0, t1, ...extra });
  }
  for (const event of events) {
    const here = lanes.get(event.lane);
    if (event.type === "spawn") arrow("spawn", event, here, resolve(event.to, event.to_activation, event.t), event.t, event.t);
    else if (event.type === "message") arrow("message", event, here, resolve(event.to, event.to_activation, event.t), event.t, event.t);
    else if (event.type === "return" && event.to) arrow("return", event, here, resolve(event.to, event.to_activation, event.t), event.t, event.t);
    else if (event.type === "orchestrator_decision" && event.decision === "delegate") {
      arrow(event.handoff ? "handoff" : "delegate", event, here, resolve(event.to, event.to_activation, event.t), event.t, event.t);
    }
  }
  for (const edge of trace.edges || []) {
    const src = byId.get(edge.src);
    const dst = byId.get(edge.dst);
    if (edge.type === "aggregate" && src && dst) {
      const target = { ...dst, id: `${src.id}>${dst.id}` };
      arrow("aggregate", target, lanes.get(src.lane), lanes.get(dst.lane), src.t, dst.t, { src: src.id, dst: dst.id });
    }
  }

  for (const item of lanes.values()) {
    if (item.start === Infinity) item.start = item.end = 0;
  }
  // Agents in order of their first start; activations in order within each.
  const order = [...lanes.values()].sort((a, b) => a.start - b.start || (a.activation ?? 0) - (b.activation ?? 0));
  const agents = [];
  for (const item of order) if (!agents.includes(item.agent)) agents.push(item.agent);
  const ordered = agents.flatMap((agent) =>
    order.filter((l) => l.agent === agent).sort((a, b) => (a.activation ?? 0) - (b.activation ?? 0)));

  const end = Math.max(
    trace.costs?.wall_clock_s || 0,
    ...ordered.map((l) => l.end),
    ...events.map((e) => e.t_end ?? e.t),
  );
  return {
    trace, events, timeline: [...events].sort(byStart), turns: orderedTurns, lanes: ordered,
    laneByKey: lanes, agents, arrows, end, byId, resolve,
  };
}

// An activation's name as people read it: the agent's name, with `#k` when it ran more than once.
export function laneName(item) {
  return item.label && item.label !== item.agent ? `${item.agent} #${item.activation}` : item.agent;
}

// What a decision is, as the rollout comparison matches it: who decided what about which agent (names,
// not activations: two rollouts number their activations alike only by chance).
export function decisionKey(episode, event) {
  const target = episode.resolve(event.to, event.to_activation, event.t);
  return [event.agent, event.decision || event.label || "decision", target ? target.agent : ""].join(" \u2192 ");
}

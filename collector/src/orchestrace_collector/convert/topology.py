"""The run's topology: declared (``orchestrace.task.topology``) or inferred from the structure and the
declared roles (``orchestrace.agent.role``), never from names: a graph or agent may be called anything.

Inference, from these signals:

- ``planner_executor_critic``: instances whose declared roles are a planner, an executor and a critic (roles
  containing ``plan``; ``exec``; ``critic`` / ``review`` / ``verif``).
- ``debate``: at least two peers (not the top-level orchestrator) send messages to other peers, one of them
  more than once (rounds), and something merges them (an ``aggregate`` event, or an instance whose declared
  role is a ``judge`` / ``aggregat`` / ``moderat``).
- ``swarm``: handoffs (a spawn/delegate/decision with ``orchestrace.handoff``) from two or more distinct
  agents to peers: control moves peer to peer. When every handoff comes from one hub agent (a supervisor whose
  ``transfer_to_*`` tools hand work out, the workers coming back to it), it is not a swarm.
- ``hierarchical``: an actor under two or more delegating levels: enclosing instances that are agents, or
  workflows that delegate to two or more actors (a graph's orchestrator; a workflow around a single actor,
  such as an ``ot.task`` around the lead agent, is a wrapper and does not count).

One signal gives that topology, several give ``mixed``; none, with at least one delegation (an actor inside
another), gives ``centralized``; otherwise ``unknown``.
"""

from __future__ import annotations

from .actors import Actors, Instance
from .classify import AGENT
from .events import Ev
from .kinds import TOPOLOGIES, Topology

_PEC = (("plan",), ("exec",), ("critic", "review", "verif"))
_MERGERS = ("judge", "aggregat", "moderat")


def _role(inst: Instance) -> str:
    return (inst.role or "").lower()


def infer_topology(actors: Actors, events: list[Ev], declared: object) -> Topology:
    named = TOPOLOGIES.get(declared) if isinstance(declared, str) else None
    if named is not None:
        return named
    instances = [i for i in actors.instances if i.node is not None]
    signals: list[Topology] = []
    roles = [_role(i) for i in instances if i.role]
    if all(any(any(k in r for k in keys) for r in roles) for keys in _PEC):
        signals.append("planner_executor_critic")
    if _debate(events, roles):
        signals.append("debate")
    if _swarm(events):
        signals.append("swarm")
    if _hierarchical(instances):
        signals.append("hierarchical")
    if len(signals) > 1:
        return "mixed"
    if signals:
        return signals[0]
    if any(i.parent is not None for i in instances):
        return "centralized"
    return "unknown"


def _swarm(events: list[Ev]) -> bool:
    senders = {
        ev.owner.name for ev in events
        if ev.handoff and ev.to and (ev.to, ev.to_act) != (ev.owner.name, ev.owner.activation)
    }
    return len(senders) >= 2


def _hierarchical(instances: list[Instance]) -> bool:
    levels: dict[int, int] = {}  # id(instance) -> delegating levels above it and including it
    for inst in instances:  # in start order: a parent before its children
        parent = inst.parent
        above = levels.get(id(parent), 0) if parent is not None else 0
        delegates = inst.sub_kind == AGENT or len(inst.children) >= 2
        levels[id(inst)] = above + (1 if delegates and inst.children else 0)
        if above >= 2:
            return True
    return False


def _debate(events: list[Ev], roles: list[str]) -> bool:
    sent: dict[str, int] = {}
    for ev in events:
        if ev.type != "message" or ev.recipient is None or ev.recipient.parent is None:
            continue
        sender = ev.owner if ev.actor is ev.owner else None
        if sender is None or sender.parent is None or sender is ev.recipient:
            continue
        sent[sender.label] = sent.get(sender.label, 0) + 1
    if len(sent) < 2 or max(sent.values()) < 2:
        return False
    return any(ev.type == "aggregate" for ev in events) or any(m in r for r in roles for m in _MERGERS)

"""``--format decisions``: one row per orchestrator sub-decision (spawn, delegate, communicate, aggregate,
stop), the dataset of an orchestrator's routing and stopping policy.

A row holds the decider, what it had at that moment (``context``: the prompt of the model call that made the
decision, when a model made it; ``context_event_ids`` / ``context_refs``: the events up to the decision and
the content they refer to, the state of the episode), the options it had when recorded (``options``), its
choice (``choice``: the agent's stable name, one action whichever activation it started; that activation is
``choice_activation``), the policy of the model call that made it (``response_model``, ``policy_version``),
the reward credited to the decision and the episode's outcome.

``fixed``: the graph's wiring took the route, nobody chose (a LangGraph fixed edge, the resume of a node that
asked a human). Those are no policy's actions and are left out unless ``include_fixed``. (A run that ended
because its last node had no next node is kept: that node chose not to hand over, as a supervisor's final
answer does.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .source import Episode, integer, messages, number, text, unique

DECISION = "orchestrator_decision"
#: ``reason`` of the routes a graph's wiring takes by itself (the LangGraph integration's): a fixed edge, the
#: resume of a node that asked a human.
FIXED_REASONS = frozenset({"edge", "resume"})


def decision_rows(episodes: list[Episode], *, include_fixed: bool = False) -> Iterator[dict[str, Any]]:
    for episode in episodes:
        deciding_turn = {str(e): turn for turn in episode.turns for e in turn.get("event_ids") or []}
        metrics = episode.trace.get("metrics") or {}
        before: list[dict[str, Any]] = []
        for event in episode.events:
            fixed = event.get("reason") in FIXED_REASONS
            if event.get("type") == DECISION and (include_fixed or not fixed):
                turn = deciding_turn.get(str(event.get("id")))
                agent = str(event.get("agent") or "")
                options = event.get("options")
                yield {
                    "task_id": episode.task_id,
                    "trace_id": episode.trace_id,
                    "agent": agent,
                    "role": text(event.get("role")) or episode.roles.get(agent),
                    "reward": number(event.get("credit")),
                    "flags": episode.flags,
                    "decision_id": str(event.get("id")),
                    "t": number(event.get("t")),
                    "decision": text(event.get("decision")),
                    "label": text(event.get("label")),
                    "activation": integer(event.get("activation")),
                    "agent_id": text(event.get("agent_id")),
                    "options": [str(o) for o in options] if isinstance(options, list) else None,
                    "choice": text(event.get("to")),
                    "choice_activation": integer(event.get("to_activation")),
                    "fixed": fixed,
                    "reason": text(event.get("reason")),
                    "handoff": event.get("handoff") if isinstance(event.get("handoff"), bool) else None,
                    "turn_id": text(turn.get("turn_id")) if turn else None,
                    "response_model": text(turn.get("response_model")) if turn else None,
                    "policy_version": text(turn.get("policy_version")) if turn else None,
                    "context": messages(turn.get("prompt")) if turn else None,
                    "context_ref": text(turn.get("input_ref")) if turn else None,
                    "context_event_ids": [str(e.get("id")) for e in before],
                    "context_refs": unique(str(e["content_ref"]) for e in before if e.get("content_ref")),
                    "recorded_reward": number(event.get("reward")),
                    "episode_reward": episode.outcome(),
                    "episode_rewards": episode.outcome_rewards(),
                    "task_success": number(metrics.get("task_success")),
                }
            before.append(event)

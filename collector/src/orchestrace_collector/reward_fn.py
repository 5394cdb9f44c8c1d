"""User reward functions (``--reward module:function`` on ``collect`` and ``convert``).

The function is given the assembled :class:`~orchestrace_collector.model.Trace` and returns either a mapping
of rewards (``{"team": 1.0, "verifier:unit_tests": 0.5}``), or a new ``Trace`` that replaces it, or None
(nothing to add). Each reward of the mapping is a team-unit channel set as ``orchestrace annotate`` sets one
(``annotations.py``: the same keys, replace rule, and credit again with the run's strategy), part of the
episode's outcome. A reward that is not a finite number or whose family is not a team-unit one is not
applied: logged and counted in
``metrics.rejected_rewards``. A function that raises is logged and the trace is written without its rewards:
a reward bug never loses data.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from orchestrace_collector.annotations import make_annotation
from orchestrace_collector.assemble import ConvertedEpisode, EpisodeHook
from orchestrace_collector.convert.rewards import REJECTED
from orchestrace_collector.model import Trace

log = logging.getLogger(__name__)

RewardFunction = Callable[[Trace], Any]


class RewardSpecError(ValueError):
    pass


def load_reward_function(spec: str) -> RewardFunction:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise RewardSpecError(f"--reward must be module:function, not {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RewardSpecError(f"cannot import {module_name!r}: {exc}") from None
    function = getattr(module, attr, None)
    if not callable(function):
        raise RewardSpecError(f"{module_name!r} has no function {attr!r}")
    return function


def reward_hook(function: RewardFunction, strategy: str = "causal") -> EpisodeHook:
    def apply(episode: ConvertedEpisode) -> None:
        try:
            result = function(episode.trace)
        except Exception:
            log.exception(
                "orchestrace: reward function %r failed on trace %s", function, episode.trace.trace_id
            )
            return
        if isinstance(result, Trace):
            episode.trace = result
        elif isinstance(result, Mapping):
            merge_rewards(episode, result, strategy)
        elif result is not None:
            log.error(
                "orchestrace: reward function %r returned %s; expected a dict of rewards or a Trace",
                function,
                type(result).__name__,
            )

    return apply


def merge_rewards(episode: ConvertedEpisode, rewards: Mapping[Any, Any], strategy: str = "causal") -> None:
    trace = episode.trace
    for key, value in rewards.items():
        try:
            annotation = make_annotation(trace.trace_id, str(key), value, "replace", strategy)
        except (ValueError, TypeError) as exc:
            log.error("orchestrace: reward %r=%r from a reward function not applied: %s", key, value, exc)
            trace.metrics[REJECTED] = trace.metrics.get(REJECTED, 0.0) + 1
            continue
        episode.turns = annotation.apply(trace, episode.turns)

"""User reward functions (``--reward module:function`` on ``collect`` and ``convert``).

The function is given the assembled :class:`~orchestrace_collector.model.Trace` and returns either a mapping
of rewards (``{"team": 1.0, "verifier": 0.5}``) merged into ``trace.rewards``, or a new ``Trace`` that
replaces it, or None (nothing to add). Merged rewards are credited down to events and turns again with the
converter's credit strategy (``convert.credit``, causal), as ``orchestrace annotate`` does for a late team
reward. A function that raises is logged and the trace is written without its rewards: a reward bug never
loses data.
"""

from __future__ import annotations

import importlib
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from orchestrace_collector.assemble import ConvertedEpisode, EpisodeHook
from orchestrace_collector.convert.credit import apply_credit, credit_turns
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


def reward_hook(function: RewardFunction) -> EpisodeHook:
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
            rewards = {str(k): float(v) for k, v in result.items()}
            if not all(map(math.isfinite, rewards.values())):
                # NaN or infinity has no JSON form: the schema's numbers could not hold it.
                log.error("orchestrace: reward function %r gave non-finite rewards: %s", function, rewards)
                rewards = {k: v for k, v in rewards.items() if math.isfinite(v)}
            merge_rewards(episode, rewards)
        elif result is not None:
            log.error(
                "orchestrace: reward function %r returned %s; expected a dict of rewards or a Trace",
                function,
                type(result).__name__,
            )

    return apply


def merge_rewards(episode: ConvertedEpisode, rewards: Mapping[str, float], strategy: str = "causal") -> None:
    episode.trace.rewards.update(rewards)
    apply_credit(episode.trace, strategy)
    episode.turns = credit_turns(episode.trace, episode.turns)

"""Which episode (rollout) a top-level graph run belongs to.

One invocation with new input is one episode, even on a reused ``thread_id``: a thread is a conversation
that may hold many rollouts. Only a resume (``Command(resume=...)``, or ``None`` input that continues a
thread after an interrupt or a static breakpoint) joins the episode it continues. Inside ``ot.task`` the
run is part of that task's episode. The episode id is written into the run's checkpoint metadata
(``orchestrace_episode_id``), so a resume in another process, on a shared checkpointer, finds it too.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from langgraph.types import Command
from opentelemetry import context as otel_context
from opentelemetry.trace import Span
from orchestrace.instrumentation import SPAN_KEY, current_task

from orchestrace_langgraph import compat

#: Given a run's config, the episode id the app chose for it (``None``: decide as described above).
EpisodeId = Callable[[dict[str, Any]], "str | None"]
#: Checkpoint metadata key holding the episode id of the run that wrote the checkpoint.
METADATA_KEY = "orchestrace_episode_id"


def is_resume(graph_input: Any, thread_id: object) -> bool:
    return (isinstance(graph_input, Command) and graph_input.resume is not None) or (
        graph_input is None and thread_id is not None)


class Episodes:
    def __init__(self, chosen: EpisodeId | None, size: int = 4096) -> None:
        self._chosen = chosen
        self._by_thread: OrderedDict[str, str] = OrderedDict()  # the last episode of each thread
        self._size = size
        self._lock = threading.Lock()

    def prepare(self, graph: Any, config: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                ) -> tuple[tuple[Any, ...], dict[str, Any], str | None] | None:
        """The call's arguments with the episode id in the metadata of ``config`` (the call's, ensured: a copy
        of ours) when the run writes checkpoints, and that id; ``None`` for a subgraph run (its parent's
        episode) or a run inside someone else's trace (the trace is the episode). May raise: its caller
        (the run's start) is guarded."""
        conf = compat.configurable(config)
        if compat.is_subgraph_run(conf):
            return None
        thread_id = conf.get("thread_id")
        episode = self._chosen(config) if self._chosen is not None else None
        if episode is None:
            ctx = otel_context.get_current()  # read once, for the task and the span
            task = current_task(ctx)
            span = ctx.get(SPAN_KEY)
            if task is not None:
                episode = task.episode_id
            elif isinstance(span, Span) and span.get_span_context().is_valid:
                return None
            elif is_resume(args[0] if args else kwargs.get("input"), thread_id):
                episode = self._of_thread(graph, config, thread_id)
        episode = episode or uuid.uuid4().hex
        if thread_id is not None:
            with self._lock:
                self._by_thread[str(thread_id)] = episode
                self._by_thread.move_to_end(str(thread_id))
                while len(self._by_thread) > self._size:
                    self._by_thread.popitem(last=False)
        if not compat.saves_checkpoints(graph, conf):
            # Only a checkpoint keeps it; in the config, LangChain would merge it into every task's metadata.
            return args, kwargs, episode
        config["metadata"] = {**(config.get("metadata") or {}), METADATA_KEY: episode}
        if len(args) > 1:
            args = (args[0], config, *args[2:])
        else:
            kwargs = {**kwargs, "config": config}
        return args, kwargs, episode

    def _of_thread(self, graph: Any, config: dict[str, Any], thread_id: object) -> str | None:
        if thread_id is None:
            return None
        with self._lock:
            known = self._by_thread.get(str(thread_id))
        if known is not None:
            return known
        saver = getattr(graph, "checkpointer", None)
        get_tuple = getattr(saver, "get_tuple", None)
        if get_tuple is None:
            return None
        try:
            saved = get_tuple(compat.checkpoint_config(thread_id))
        except Exception:  # an async-only saver, a store that is down: the resume gets its own episode
            return None
        value = getattr(saved, "metadata", None) or {}
        episode = value.get(METADATA_KEY) if isinstance(value, dict) else None
        return str(episode) if episode else None

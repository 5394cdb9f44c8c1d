"""The custom-agents example: its span tree, attributes and events, and its traces through the collector."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from orchestrace import semconv as sc
from sdk_spans import Spans

from examples.custom_agents import app  # the repository root is on sys.path (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


def _children(spans: Spans, parent: ReadableSpan, prefix: str = "") -> list[ReadableSpan]:
    return [s for s in spans.all if s.parent is not None
            and s.parent.span_id == parent.context.span_id and s.name.startswith(prefix)]


def _event_names(span: ReadableSpan) -> list[str]:
    return [event.name for event in span.events]


async def test_span_tree(spans: Spans) -> None:
    answer = await app.run_team()
    assert answer.count("\n- ") == 3

    (task,) = spans.named("invoke_workflow research-team")
    assert task.parent is None
    assert task.attributes[sc.ORCH_TOPOLOGY] == "centralized"
    assert task.attributes[sc.ORCH_TASK_SUCCESS] == 1.0

    (orchestrator,) = _children(spans, task)
    assert orchestrator.name == "invoke_agent orchestrator"
    assert orchestrator.attributes[sc.ORCH_AGENT_ROLE] == "orchestrator"
    orchestrator_id = orchestrator.attributes[sc.GEN_AI_AGENT_ID]
    assert _event_names(orchestrator) == [sc.EVENT_DECISION] + [sc.EVENT_SPAWN] * 3 + [
        sc.EVENT_DELEGATE, sc.EVENT_STOP, sc.EVENT_EVALUATION_RESULT]
    reward = orchestrator.events[-1].attributes
    assert reward[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0 and reward[sc.ORCH_REWARD_FAMILY] == "team"

    researchers = _children(spans, orchestrator, "invoke_agent researcher")
    assert len(researchers) == 3
    assert len({r.attributes[sc.GEN_AI_AGENT_ID] for r in researchers}) == 3
    starts = sorted(r.start_time for r in researchers)
    ends = sorted(r.end_time for r in researchers)
    assert starts[-1] < ends[0]  # all three ran at once (asyncio), not one after another
    for researcher in researchers:
        assert researcher.attributes[sc.ORCH_AGENT_PARENT_ID] == orchestrator_id
        assert _event_names(researcher) == [sc.EVENT_MESSAGE]
        (tool,) = _children(spans, researcher, "execute_tool")
        assert tool.name == "execute_tool search_notes"
        (chat,) = _children(spans, researcher, "chat")
        assert chat.name == f"chat {app.MODEL}"
        assert chat.attributes[sc.GEN_AI_PROVIDER_NAME] == "orchestrace-fake"
        assert int(chat.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS]) > 0  # type: ignore[arg-type]
        assert int(chat.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) > 0  # type: ignore[arg-type]
        assert chat.attributes[sc.GEN_AI_RESPONSE_MODEL] == app.MODEL

    (aggregator,) = _children(spans, orchestrator, "invoke_agent aggregator")
    assert aggregator.attributes[sc.ORCH_AGENT_PARENT_ID] == orchestrator_id
    (merge,) = _children(spans, aggregator)
    assert merge.name == "aggregate aggregator"
    assert merge.attributes[sc.ORCH_OPERATION] == sc.OPERATION_AGGREGATE
    assert {link.context.span_id for link in merge.links} == {r.context.span_id for r in researchers}
    assert len(spans.all) == 13


def test_command_line_writes_valid_traces(tmp_path: Path, trace_dir_validator: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "examples.custom_agents.app", "--exporter", "none", "--trace-dir",
         str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "- Physics:" in done.stdout
    (trace,) = trace_dir_validator(tmp_path).values()
    assert trace["topology"] == "centralized"
    decisions = {e.get("decision") for e in trace["events"] if e["type"] == "orchestrator_decision"}
    assert {"spawn", "delegate", "stop"} <= decisions
    (merge,) = [e for e in trace["events"] if e["type"] == "aggregate"]
    merged = [edge for edge in trace["edges"] if edge["type"] == "aggregate" and edge["dst"] == merge["id"]]
    assert len(merged) == 3  # the three researchers' returns
    assert trace["costs"]["tool_calls"] == 3
    senders = {e["agent"] for e in trace["events"] if e["type"] == "message"}
    assert len(senders) == 3  # each researcher instance sent its own message
    assert trace["rewards"]["team"] == 1.0

"""The vocabularies conversion reads: one file per library under ``convert/vocabularies/``, registered in one
list, and a core that names none of them and classifies and names each span once."""

from __future__ import annotations

import ast
import dataclasses
import pkgutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import orchestrace_collector
import pytest
from convert_support import GOLDEN, Spans
from orchestrace_collector.convert import classify, convert_episode, vocabularies
from orchestrace_collector.decode import decode_file
from orchestrace_collector.model import EventType
from orchestrace_collector.spans import Span

_CONVERT = Path(vocabularies.__file__).parents[1]
#: Modules of the vocabularies package that are no vocabulary: the interface.
_NOT_VOCABULARIES = {"base"}


def _library_modules() -> list[str]:
    return [m.name for m in pkgutil.iter_modules(vocabularies.__path__) if m.name not in _NOT_VOCABULARIES]


def test_every_vocabulary_file_is_registered_once() -> None:
    registered = Counter(v.name for v in vocabularies.VOCABULARIES)
    assert sorted(registered) == sorted(_library_modules()) and set(registered.values()) == {1}


#: The base conventions, the core's own (every other vocabulary is read as GenAI).
_BASE = {"genai", "orchestrace"}


def _tree(name: str) -> ast.Module:
    return ast.parse((Path(vocabularies.__path__[0]) / f"{name}.py").read_text())


def _semconv_names(tree: ast.AST) -> set[str]:
    """The ``orchestrace_semconv`` names a module reads (``sc.X``)."""
    return {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "sc"}


def _library_strings() -> set[str]:
    """Every string constant a vocabulary file declares that names a key, a scope or a value of its own."""
    found: set[str] = set()
    for name in _library_modules():
        tree = _tree(name)
        found |= {value for value in _literals(tree) if len(value) > 3 and value.split() == [value]}
    return found


def _literals(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_the_core_names_no_library() -> None:
    """No conversion module outside ``vocabularies/`` spells a key, value or scope a vocabulary declares, nor
    imports a vocabulary file: what a library's spans say is in its file alone."""
    strings = _library_strings()
    libraries = set(_library_modules())
    assert {"traceloop.span.kind", "langfuse.observation.type", "logfire.span_type"} <= strings
    # What other libraries read through ``orchestrace_semconv`` but the GenAI names they are read into.
    foreign_semconv = {
        name for m in libraries - _BASE for name in _semconv_names(_tree(m)) if not name.startswith("GEN_AI_")
    }
    assert "OPENINFERENCE_SPAN_KIND" in foreign_semconv
    for path in sorted(_CONVERT.glob("*.py")):
        tree = ast.parse(path.read_text())
        # Plain words (message roles, sub-kinds) and the trace's event types are the mapping's own.
        named = {s for s in _literals(tree) & strings if "." in s or "_" in s.strip("_") or "-" in s}
        named -= set(get_args(EventType))
        assert not named, f"{path.name} names {sorted(named)}"
        assert not _semconv_names(tree) & foreign_semconv, f"{path.name} reads another library's key"
        imported = {
            alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "vocabularies"
            for alias in n.names
        } | {
            n.module.rpartition(".")[2] for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("vocabularies.")
        }
        assert not imported & libraries, f"{path.name} imports {sorted(imported & libraries)}"


def _counting(monkeypatch: pytest.MonkeyPatch, name: str, calls: Counter[str]) -> None:
    """Counts, by span id, the calls of ``classify.<name>`` from every conversion module that imported it."""
    original: Callable[..., Any] = getattr(classify, name)

    def counted(span: Any, *args: Any) -> Any:
        calls[span.span_id] += 1
        return original(span, *args)

    for module in list(vars(orchestrace_collector.convert).values()):
        if getattr(module, name, None) is original:
            monkeypatch.setattr(module, name, counted)
    for path in _CONVERT.glob("*.py"):
        module = __import__(f"orchestrace_collector.convert.{path.stem}", fromlist=["_"])
        if getattr(module, name, None) is original:
            monkeypatch.setattr(module, name, counted)


@pytest.mark.skipif(orchestrace_collector.compiled(), reason="compiled modules call each other natively")
@pytest.mark.parametrize("dump", ["adk_spans", "agents_openllmetry", "smolagents_managed", "strands_swarm"])
def test_each_span_is_classified_and_named_once(dump: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversion classifies each span once and derives each of its names once, when the forest is built:
    later stages read the node's kind and names (they used to derive an actor's name three times, a tool's
    four)."""
    spans = list(decode_file(GOLDEN / f"{dump}.jsonl"))
    counts = {name: Counter[str]() for name in ("classify", "actor_name", "tool_name", "created_agent_name",
                                                "model_name", "provider_name", "agent_id")}
    for name, calls in counts.items():
        _counting(monkeypatch, name, calls)
    convert_episode(spans)
    assert counts["classify"] and counts["actor_name"] and counts["tool_name"] and counts["model_name"]
    for name, calls in counts.items():
        assert max(calls.values(), default=1) == 1, f"{name} called again for {calls.most_common(1)}"


def _rule_spans() -> list[tuple[Span, Span | None]]:
    """A span each vocabulary's kind rules answer for, with its parent."""
    s = Spans()
    return [(s.span(name, 0, 1, attrs=attrs), None) for name, attrs in [
        ("n", {"traceloop.span.kind": "task", "traceloop.entity.name": "n",
               "traceloop.association.properties.langgraph_node": "n"}),
        ("call", {"llm.request.type": "chat"}),
        ("run", {"openinference.span.kind": "CHAIN"}),
        ("n", {"langgraph.node": "n"}),
        ("loop", {"ai.operationId": "ai.generateText", "ai.telemetry.functionId": "writer"}),
        ("handoff", {"gen_ai.handoff.to_agent": "writer"}),
        ("call", {"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 3}),
        ("running tool", {"gen_ai.tool.name": "search"}),
    ]]


def test_kind_rules_read_only_the_keys_they_declare() -> None:
    """``classify`` calls a vocabulary's kind rules only for a span with one of its ``kind_keys`` (a span
    without them is classified without a call): so the same span without those keys must get no verdict from
    them, for every span of the golden dumps and one each rule answers for."""
    spans = _rule_spans()
    for dump in sorted(GOLDEN.glob("*.jsonl")):
        dumped = decode_file(dump)
        by_id = {(span.trace_id, span.span_id): span for span in dumped}
        spans += [(span, by_id.get((span.trace_id, span.parent_span_id or ""))) for span in dumped]
    answered: Counter[str] = Counter()
    for v in vocabularies.VOCABULARIES:
        rules = [rule for rule in (v.kind, v.fallback_kind) if rule is not None]
        for span, parent in spans:
            bare = dataclasses.replace(
                span, attributes={k: x for k, x in span.attributes.items() if k not in v.kind_keys})
            for rule in rules:
                answered[v.name] += rule(span, parent) is not None
                assert rule(bare, parent) is None, f"{v.name} answers for {span.name} without its kind_keys"
    assert {name for name, n in answered.items() if n} == {
        v.name for v in vocabularies.VOCABULARIES if v.kind or v.fallback_kind}

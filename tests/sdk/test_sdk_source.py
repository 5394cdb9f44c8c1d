"""Rules of the SDK's source and public surface that no behaviour shows."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import orchestrace

SDK = Path(orchestrace.__file__).parent


def test_the_capture_settings_have_one_name() -> None:
    """Every parameter, attribute and variable holding a ``CaptureConfig`` is called ``capture``, as
    ``Telemetry.capture`` is (not ``config`` here and ``capture_config`` there)."""
    named: dict[str, set[str]] = {}
    for path in sorted(SDK.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.arg) and node.annotation is not None:
                if "CaptureConfig" in ast.unparse(node.annotation):
                    named.setdefault(node.arg, set()).add(path.name)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute | ast.IfExp):
                value = node.value.body if isinstance(node.value, ast.IfExp) else node.value
                if isinstance(value, ast.Attribute) and value.attr == "capture":
                    for target in node.targets:
                        name = target.attr if isinstance(target, ast.Attribute) else ast.unparse(target)
                        named.setdefault(name, set()).add(path.name)
    assert set(named) == {"capture"}, named


def test_no_module_of_the_sdk_imports_itself_back() -> None:
    """No import cycle in the SDK, lazy and type-only imports included; this also sees the cycles that pass
    through a package's ``__init__`` (``replies.stream`` -> ``replies`` -> ``replies.openai_chat`` ->
    ``replies.stream``), which the import-linter contract (``acyclic_siblings``) does not."""
    graph = grimp.build_graph("orchestrace")
    cycles = [
        (module, *chain)
        for module in sorted(graph.modules)
        for imported in sorted(graph.find_modules_directly_imported_by(module))
        if (chain := graph.find_shortest_chain(importer=imported, imported=module)) is not None
    ]
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_public_api_is_what_the_contract_names() -> None:
    """``import orchestrace as ot`` offers what CONTRACT.md and the docs name, and nothing unused besides
    (``ot.get_tracer`` was exported and used by nobody: integrations take their tracer from a Telemetry)."""
    assert set(orchestrace.__all__) == {
        "configure", "TracingHandle", "Telemetry", "CaptureConfig", "__version__",
        "agent", "tool", "llm", "task", "TaskRun",
        "spawn", "delegate", "message", "aggregate", "Aggregation", "decide", "stop", "human_intervention",
        "safety_event", "reward", "rejected_rewards", "set_usage", "content_ref", "gather",
        "current_agent", "AgentFrame", "inject", "extract", "attach", "wrap_context", "ThreadPoolExecutor",
    }
    assert all(hasattr(orchestrace, name) for name in orchestrace.__all__)
    assert not hasattr(orchestrace, "get_tracer")

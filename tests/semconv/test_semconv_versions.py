"""The switch between today's GenAI names and the latest ``semantic-conventions-genai`` release's."""

from __future__ import annotations

from pathlib import Path

import orchestrace_semconv as sc
import pytest
from opentelemetry.instrumentation import _semconv as contrib

# Values users may set: the opt-in alone, among others, with blanks, a near miss, and none.
OPT_INS = [
    None, "", "gen_ai_latest_experimental", "http,gen_ai_latest_experimental",
    " gen_ai_latest_experimental ,db", "gen_ai", "gen_ai_latest_experimental_x", "http/dup",
    "database, gen_ai_latest_experimental",
]


def _contrib_says_latest() -> bool:
    """What opentelemetry-instrumentation's own reader decides for the current environment (it caches its
    answer per process: reset it so each value is read afresh)."""
    stability = contrib._OpenTelemetrySemanticConventionStability
    stability._initialized = False
    stability._OTEL_SEMCONV_STABILITY_SIGNAL_MAPPING = {}
    gen_ai = contrib._OpenTelemetryStabilitySignalType.GEN_AI
    mode = contrib._get_semconv_opt_in_modes((gen_ai,))[gen_ai]
    return mode is contrib._StabilityMode.GEN_AI_LATEST_EXPERIMENTAL


@pytest.mark.parametrize("opt_in", OPT_INS)
def test_the_switch_reads_the_variable_as_contrib_does(opt_in: str | None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    if opt_in is None:
        monkeypatch.delenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, raising=False)
    else:
        monkeypatch.setenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, opt_in)
    try:
        assert sc.gen_ai_latest_experimental() is _contrib_says_latest()
        assert sc.gen_ai_names() is (sc.GEN_AI_LATEST if _contrib_says_latest() else sc.GEN_AI_DEFAULT)
    finally:
        monkeypatch.delenv(sc.OTEL_SEMCONV_STABILITY_OPT_IN, raising=False)
        _contrib_says_latest()  # leave contrib's cache as the unset variable says


def test_the_two_name_sets() -> None:
    assert sc.GenAiNames(
        runner_operation="invoke_workflow",
        cache_write_input_tokens="gen_ai.usage.cache_creation.input_tokens",
        cache_counts_outside_model_calls=True,
    ) == sc.GEN_AI_DEFAULT
    assert sc.GenAiNames(
        runner_operation="handle_conversation_turn",
        cache_write_input_tokens="gen_ai.usage.cache_write.input_tokens",
        cache_counts_outside_model_calls=False,
    ) == sc.GEN_AI_LATEST
    # Readers take every name a writer may use.
    assert set(sc.CACHE_WRITE_INPUT_TOKENS_NAMES) == {
        sc.GEN_AI_DEFAULT.cache_write_input_tokens, sc.GEN_AI_LATEST.cache_write_input_tokens,
    }
    assert sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS == "gen_ai.usage.cache_read.input_tokens"


def test_the_readme_table_states_the_names_written() -> None:
    """semconv/README.md's table says, for each setting, the names ``gen_ai_names()`` gives."""
    readme = (Path(__file__).resolve().parents[2] / "semconv" / "README.md").read_text()
    rows = {}
    for line in readme.splitlines():
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and line.startswith("|"):
            rows[cells[0].split(":")[0].split(" (")[0]] = (cells[1], cells[2])
    assert rows["a framework runner's entrypoint"] == (
        sc.GEN_AI_DEFAULT.runner_operation, sc.GEN_AI_LATEST.runner_operation,
    )
    assert rows["input tokens written to a prompt cache"] == (
        sc.GEN_AI_DEFAULT.cache_write_input_tokens, sc.GEN_AI_LATEST.cache_write_input_tokens,
    )
    assert rows["input tokens read from a prompt cache"] == (sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,) * 2
    outside = rows["cache counts `ot.set_usage` states outside a model call"]
    assert [cell == "written" for cell in outside] == [
        sc.GEN_AI_DEFAULT.cache_counts_outside_model_calls, sc.GEN_AI_LATEST.cache_counts_outside_model_calls]

# The README's two commands: `make demo` and `make test` (also `make docs`: the docs site). Each bootstraps uv and the locked venv itself.
PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
# Absolute: Ray's `uv run` hook starts cluster workers with the driver's uv command line, in another directory.
UV := $(CURDIR)/.tools/bin/uv
endif
RUN := $(UV) run --frozen

.PHONY: demo test test-slow lint pytest bench docs sync clean

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet uv

# Bytecode compiled at install: where PYTHONDONTWRITEBYTECODE is set (as on the bench machine) every interpreter
# would otherwise recompile what it imports, each time (`import ray` 1.5 -> 0.7 CPU s; a Ray run starts three).
.venv/.synced: $(UV) uv.lock pyproject.toml semconv/pyproject.toml sdk/pyproject.toml \
		integrations/langgraph/pyproject.toml integrations/openai-agents/pyproject.toml collector/pyproject.toml
	$(UV) sync --frozen --all-packages --compile-bytecode
	@touch $@

# The hot conversion modules compiled with mypyc, outside the source tree (collector/build_mypyc.py): rerun when
# a source may have changed; the script rebuilds only when its manifest no longer matches them.
MYPYC_STAMP := collector/build/mypyc/.stamp
$(MYPYC_STAMP): .venv/.synced collector/build_mypyc.py $(wildcard collector/src/orchestrace_collector/*.py \
		collector/src/orchestrace_collector/convert/*.py collector/src/orchestrace_collector/convert/vocabularies/*.py \
		semconv/src/orchestrace_semconv/*.py)
	$(RUN) python collector/build_mypyc.py
	@mkdir -p $(dir $@) && touch $@  # also after a failed compile (removed build): that one runs pure Python

sync: .venv/.synced $(MYPYC_STAMP)

demo: sync
	$(RUN) python examples/demo.py

test: lint pytest

lint: sync
	$(RUN) ruff check .
	$(RUN) mypy
	$(RUN) lint-imports

# The fast suite (pyproject deselects the tests marked slow), on two pytest-xdist workers: most tests wait on
# subprocesses and sockets. A file's tests stay on one worker (tests/conftest.py); tests share one by xdist_group.
pytest: sync
	$(RUN) pytest -q -n 2 --dist loadgroup

# The slow tests: the benchmark smoke run, the Ray engine, long fault tests. CI runs them after `make test`.
test-slow: sync
	$(RUN) pytest -q -m slow

bench: sync
	$(RUN) python -m bench

# The docs site (mkdocs.yml) into site/; DOCS_FLAGS=--strict (as CI builds it) fails on a broken link or reference.
DOCS_FLAGS ?=
docs: sync
	NO_MKDOCS_2_WARNING=1 $(RUN) mkdocs build $(DOCS_FLAGS)

clean:
	rm -rf .venv .tools out site collector/build

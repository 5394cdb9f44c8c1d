"""Runnable examples of orchestrace: from the repository root, ``uv run python -m examples.<name>.app``."""

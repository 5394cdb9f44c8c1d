"""Runnable examples of orchestrace: from the repository root, ``.venv/bin/python -m examples.<name>.app``."""

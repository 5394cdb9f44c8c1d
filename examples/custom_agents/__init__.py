"""The framework-free custom-agents example (see app.py)."""

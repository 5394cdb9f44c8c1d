"""The hierarchical example (see app.py)."""

"""The map_reduce example (see app.py)."""

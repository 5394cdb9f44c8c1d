"""The supervisor example (see app.py)."""

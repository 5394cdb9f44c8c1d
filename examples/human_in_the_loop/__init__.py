"""The human_in_the_loop example (see app.py)."""

"""The swarm example (see app.py)."""

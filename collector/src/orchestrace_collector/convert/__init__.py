"""Span trees -> orchestration traces: the mapping documented in this package's README.md.

``convert_episode`` is the entry point; ``orchestrace_collector.annotations`` re-assigns credit after late
rewards.
"""

from .episode import Episode, convert_episode

__all__ = ["Episode", "convert_episode"]

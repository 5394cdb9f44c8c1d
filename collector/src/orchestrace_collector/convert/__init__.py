"""Span trees -> orchestration traces: the mapping documented in this package's README.md.

``convert_episode`` is the entry point; ``credit.assign_credit`` re-assigns credit after late rewards.
"""

from .credit import assign_credit
from .episode import Episode, convert_episode

__all__ = ["Episode", "assign_credit", "convert_episode"]

"""Version of the orchestrace distribution."""

__version__ = "0.1.0"

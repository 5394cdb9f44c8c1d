"""The orchestrace benchmarks: ``python -m bench`` (``make bench``); see ``bench/__main__.py``."""

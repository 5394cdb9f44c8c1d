"""The collector's cyclic garbage collector settings while it serves (``collect.freeze_and_tune_gc``)."""

from __future__ import annotations

import gc

from orchestrace_collector.collect import GC_THRESHOLDS, freeze_and_tune_gc


def test_serving_freezes_start_up_objects_and_sets_rare_passes() -> None:
    before = gc.get_threshold()
    try:
        previous = freeze_and_tune_gc()
        assert previous == before  # what run_collector restores when it stops
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] > before[0]
        assert gc.get_freeze_count() > 0
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()

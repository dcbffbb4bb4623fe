"""Decoding many API objects at once, and keeping them out of the collector's way."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection while many objects decode at once, or while they are handed out.

    Decoding allocates many container objects at once, which triggers collections that
    traverse everything already stored; a 5,000-pod list decodes 2-3x faster without them.
    Handing out a list's objects is the same: the scheduler's cache builds several objects per
    pod, and at 25,000 pods the collections were a sixth of the start-up's CPU; simulate's
    reading of 15,000 objects spent half its time in them. The block must not await.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def collect_before_loading() -> None:
    """One full collection before a front end loads its objects: the garbage its imports and
    set-up left is found while the heap holds little else (30 ms at the start of ``kubesched
    run``, where the same collection after 25,000 pods were loaded took 160 ms), and so is not
    frozen by :func:`freeze_loaded`."""
    gc.collect()


def freeze_loaded() -> None:
    """Keep everything alive now out of the cyclic collector's sight (``gc.freeze``): what a
    front end loaded before its work starts mostly lives as long as it does, and every full
    collection would walk it again (long pauses; a third of the collector's time in
    PreemptionAsync, docs/benchmarks.md). Loading leaves next to no cyclic garbage (none after
    25,000 pods in ``kubesched run`` or 15,000 objects in simulate), so no collection is
    made here: :func:`collect_before_loading` made it. ``gc.unfreeze()`` undoes it,
    for a caller that goes on (tests run the front ends in their own process)."""
    gc.freeze()

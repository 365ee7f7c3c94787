"""Blocks of a fleet on a small thread pool, with results and errors in block order.

numpy releases the GIL in the kernels block evaluation spends its time in (bincount,
arithmetic, comparisons, sorts, casts), so independent blocks of clients run on a few
threads at once. :func:`run_ordered` keeps everything that could depend on scheduling
out of the result:

* each block's result is stored at its block index, so the caller combines them in block
  order, as the sequential loop does;
* each worker has its own state (``start()``: e.g. integer accumulators) and its own
  scratch workspace (pool threads enter :func:`~dpledger.metrics._scratch.reusing` with
  ``fresh=True``; the calling thread keeps its own): no buffer is shared between threads;
* blocks are handed out in increasing order, and a failed block stops the hand-out past
  it, so every block before the first failure still runs; the error raised is that of
  the FIRST failing block, the one the sequential loop would have raised;
* workers run with the caller's numpy floating-point error settings and callback
  (``np.errstate``, ``np.seterrcall``).

With one worker (or one block) the blocks run in the calling thread, in order.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar, cast

import numpy as np

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics._scratch import reusing

__all__ = ["DEFAULT_WORKERS", "MAX_WORKERS", "check_workers", "run_ordered"]


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


DEFAULT_WORKERS = max(1, min(4, _cpus()))
"""Threads per sums or rows call by default: the CPUs this process may use, at most 4."""

S = TypeVar("S")
T = TypeVar("T")


MAX_WORKERS = 256
"""The most threads a call may ask for: each has its own scratch workspace (~1 MiB), so
an absurd count (``10**6``) is a mistake to name, not threads and memory to spend."""


def check_workers(workers: object) -> int:
    """``workers`` as an int in [1, :data:`MAX_WORKERS`], or :class:`InvalidInput`."""
    if isinstance(workers, bool) or not isinstance(workers, int | np.integer):
        raise InvalidInput(f"workers must be an integer ≥ 1, got {shown(workers)}")
    if workers < 1:
        raise InvalidInput(f"workers must be ≥ 1, got {workers}")
    if workers > MAX_WORKERS:
        raise InvalidInput(
            f"workers must be ≤ {MAX_WORKERS} (each thread has its own scratch memory), got "
            f"{workers}; the default is the usable CPUs up to 4"
        )
    return int(workers)


class _Run(Generic[S, T]):
    """The shared hand-out and the per-block results of one :func:`run_ordered` call."""

    def __init__(self, n: int, start: Callable[[], S], step: Callable[[S, int], T]) -> None:
        self.n, self.start, self.step = n, start, step
        self.results: list[T | None] = [None] * n
        self.errors: dict[int, BaseException] = {}
        self.lock = threading.Lock()
        self.next = 0
        self.stop = n  # no block at or past this index is handed out
        self.states: list[S] = []
        self.settings = np.geterr()
        self.errcall = np.geterrcall()  # for the 'call' and 'log' modes

    def take(self) -> int | None:
        with self.lock:
            i = self.next
            if i >= self.stop:
                return None
            self.next = i + 1
            return i

    def work(self, fresh: bool) -> None:
        call = {} if self.errcall is None else {"call": self.errcall}
        with np.errstate(**call, **self.settings), reusing(fresh=fresh):  # type: ignore[arg-type]
            state = self.start()
            with self.lock:
                self.states.append(state)
            while (i := self.take()) is not None:
                try:
                    self.results[i] = self.step(state, i)
                except BaseException as exc:
                    with self.lock:
                        self.errors[i] = exc
                        self.stop = min(self.stop, i)
                    return


def run_ordered(
    n: int, start: Callable[[], S], step: Callable[[S, int], T], workers: int
) -> tuple[list[T], Sequence[S]]:
    """Run ``step(state, i)`` for every block ``i < n`` on ``workers`` threads.

    Returns the results in block order and every worker's state (``start()``, one per
    worker that ran). If a block raises, the exception of the lowest failing block is
    raised, after the blocks before it have run.
    """
    run: _Run[S, T] = _Run(n, start, step)
    threads = max(1, min(workers, n))
    if threads == 1:
        run.work(fresh=False)
    else:
        with ThreadPoolExecutor(max_workers=threads - 1) as pool:
            futures = [pool.submit(run.work, True) for _ in range(threads - 1)]
            run.work(fresh=False)  # the calling thread is a worker too (its own workspace)
            for future in futures:
                future.result()
    if run.errors:
        raise run.errors[min(run.errors)]
    return cast(list[T], run.results), run.states

"""BLAS thread limits for the optimizers (no oversubscription).

The optimizers of :mod:`vrs_helpers.mixed` and :mod:`vrs_helpers.book.gam` factor the same small dense matrices
hundreds of times. On matrices of a few hundred rows OpenBLAS's default of one thread per core costs more in
synchronisation than it saves (measured on a 2-core machine: a 300 x 300 Cholesky 0.4 ms with one thread, up to
7 ms with two while another process runs), and several fits in parallel (``vrs batch``) oversubscribe the cores.
``blas_limit`` returns a threadpoolctl context with one BLAS thread for such sizes and leaves the library default
for large matrices, where threads pay.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import lru_cache

#: dense dimension below which "auto" uses one BLAS thread (benchmarks/mixed_models.py, benchmarks/circularity.py)
SMALL_DENSE = 1500


def blas_limit(dense_dim: int, threads="auto"):
    """A context manager limiting BLAS threads: ``threads="auto"`` gives one thread when ``dense_dim`` (the size of
    the matrices factored in the inner loop) is below :data:`SMALL_DENSE` and the library default otherwise; an int
    sets that many threads; ``None`` leaves the library default."""
    if threads == "auto":
        threads = 1 if dense_dim < SMALL_DENSE else None
    if threads is None:
        return nullcontext()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"blas_threads must be 'auto', None or a positive int, got {threads!r}.")
    return _controller().limit(limits=threads, user_api="blas")


@lru_cache(maxsize=1)
def _controller():
    """threadpoolctl's view of the loaded BLAS libraries, made once: ``threadpool_limits`` scans every loaded shared
    library on each call (0.03-0.15 s on this machine, paid by every fit; numpy's BLAS is loaded before any fit)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()

"""R's ``set.seed()``, ``runif()`` and ``sample()`` (Mersenne-Twister, R >= 3.6 "Rejection" sampling) in NumPy.

mgcv chooses the knots of a thin-plate basis with R's generator: a covariate with more than ``max.knots`` (2,000)
distinct values gets as knots the sorted unique values at ``sample(1:nu, 2000)`` after ``set.seed(1)``
(``smooth.construct.tp.smooth.spec`` via ``temp.seed``, which also restores the caller's generator). To build the
same basis, :mod:`vrs_helpers.book.gam` draws the same indices with :func:`sample`.

What R does (src/main/RNG.c, src/main/random.c):

- ``set.seed(s)`` scrambles the seed (``s = 69069 s + 1``, 50 times), then fills the 625 integers of
  ``.Random.seed``'s Mersenne-Twister state with further steps of the same congruential generator; the first is
  the position ``mti``, set to 624 (a new block of 624 words is generated at the first draw).
- ``unif_rand()`` is MT19937's tempered 32-bit output times 2^-32, moved into the open interval (0, 1).
- ``R_unif_index(n)`` draws ``ceil(log2(n))`` random bits, 16 at a time from ``floor(unif_rand() * 65536)``, and
  rejects values >= n.
- ``sample(n, k)`` without replacement: for i in 0..k-1, j = R_unif_index(n); y[i] = x[j] + 1; x[j] = x[--n].

``tests/book/test_rsample.py`` checks the draws against R's own (``tests/reference/r_sample.R``).
"""

from __future__ import annotations

import math

import numpy as np

_N, _M = 624, 397
_MATRIX_A, _UPPER, _LOWER = 0x9908B0DF, 0x80000000, 0x7FFFFFFF
_MASK32 = 0xFFFFFFFF
_I2_32M1 = 2.328306437080797e-10   # 1 / (2^32 - 1), R's fixup


class RRandom:
    """R's default generator (Mersenne-Twister) after ``set.seed(seed)``; :meth:`unif_rand`, :meth:`unif_index`
    and :meth:`sample` draw as R does."""

    def __init__(self, seed: int):
        s = int(seed) & _MASK32
        for _ in range(50):   # initial scrambling
            s = (69069 * s + 1) & _MASK32
        state = []
        for _ in range(_N + 1):   # dummy[0] (mti) and mt[0..623]
            s = (69069 * s + 1) & _MASK32
            state.append(s)
        self._mt = np.array(state[1:], dtype=np.uint64)
        self._mti = _N   # FixupSeeds(initial): dummy[0] = 624
        self._block = np.empty(0)

    def _generate(self) -> None:
        mt = self._mt
        for kk in range(_N):   # the standard MT19937 recurrence, in place
            y = (int(mt[kk]) & _UPPER) | (int(mt[(kk + 1) % _N]) & _LOWER)
            mt[kk] = int(mt[(kk + _M) % _N]) ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
        y = mt.copy()
        y ^= y >> np.uint64(11)
        y ^= (y << np.uint64(7)) & np.uint64(0x9D2C5680)
        y ^= (y << np.uint64(15)) & np.uint64(0xEFC60000)
        y ^= y >> np.uint64(18)
        self._block = (y & np.uint64(_MASK32)).astype(np.float64) * 2.3283064365386963e-10
        self._mti = 0

    def unif_rand(self) -> float:
        """One draw of R's ``unif_rand()`` (``runif(1)``)."""
        if self._mti >= _N:
            self._generate()
        v = float(self._block[self._mti])
        self._mti += 1
        if v <= 0.0:
            return 0.5 * _I2_32M1
        if 1.0 - v <= 0.0:
            return 1.0 - 0.5 * _I2_32M1
        return v

    def _rbits(self, bits: int) -> int:
        v = 0
        for _ in range(0, bits + 1, 16):   # for (n = 0; n <= bits; n += 16)
            v = 65536 * v + int(math.floor(self.unif_rand() * 65536))
        return v & ((1 << bits) - 1)

    def unif_index(self, n: int) -> int:
        """R's ``R_unif_index(n)`` with sample.kind "Rejection": a uniform integer in 0..n-1."""
        if n <= 0:
            return 0
        bits = int(math.ceil(math.log2(n)))
        while True:
            v = self._rbits(bits)
            if v < n:
                return v

    def sample(self, n: int, size: int) -> np.ndarray:
        """R's ``sample(1:n, size, replace = FALSE)`` (1-based, as R returns it)."""
        n, size = int(n), int(size)
        if not 0 <= size <= n:
            raise ValueError(f"cannot take a sample of {size} from {n} values without replacement.")
        if n > 1e7 and size <= n / 2:
            raise ValueError("R draws this sample with its hash algorithm (sample.int's useHash), not reproduced here.")
        x = list(range(n))
        y = np.empty(size, dtype=np.int64)
        m = n
        for i in range(size):
            j = self.unif_index(m)
            y[i] = x[j] + 1
            m -= 1
            x[j] = x[m]
        return y


def runif(n: int, seed: int) -> np.ndarray:
    """R's ``set.seed(seed); runif(n)``."""
    g = RRandom(seed)
    return np.array([g.unif_rand() for _ in range(int(n))])


def sample(n: int, size: int, seed: int = 1) -> np.ndarray:
    """R's ``set.seed(seed); sample(1:n, size)`` without replacement (1-based indices), as mgcv draws its knots."""
    return RRandom(seed).sample(n, size)

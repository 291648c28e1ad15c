"""L L' = I + Lambda' Z' W Z Lambda of a random-intercept GLMM for a batch of weight vectors, factored by blocks,
with a nested pair of terms eliminated together (the Laplace deviance's factor: :mod:`.glmm_bootstrap` refits
batches of simulated responses with it, :mod:`.laplace` fits a model with a nested pair with it).

Blocks (lme4's / MixedModels.jl's blocked Cholesky): the levels of a "big" part are eliminated first, its block of
L L' being block diagonal; the other terms' levels form a dense Schur complement S = R - B' D^-1 B (B the cross
block). Without a nested pair the big part is the term with the most levels and D is diagonal. In the runs-random
model with the system-by-item term, ``score ~ system + (1|item) + (1|system:item) + (1|system:run)``, that term is
system:item, and the dense block would hold every item (300 items: a 306 x 306 matrix per response and evaluation,
the whole cost of the GLMM bootstrap). But every level of system:item lies in one item, so the two terms are
eliminated together, as :mod:`.nested` does for the LMM: per item ("outer" level) its intercept and the levels of
system:item ("inner") within it, r = 1 + (inner levels per outer level) positions, and the block of L L' there is an
arrowhead matrix

    D_o = [[a_o, b_o'], [b_o, diag(c_o)]],   a_o = 1 + theta_out^2 w_o,  b_ol = theta_out theta_in w_l,
                                             c_ol = 1 + theta_in^2 w_l

(w_o, w_l the weighted row counts of the levels: an inner level's rows are all in its outer level, and two inner
levels share no row). Its determinant and inverse are closed-form with the Schur complement s_o = a_o - sum_l
b_ol^2 / c_ol: det D_o = s_o prod_l c_ol, D_o^-1 = [[1/s, -b'/(c s)], [-b/(c s), diag(1/c) + b b'/(c c' s)]]
(elementwise in c). The model is the same, only the levels are regrouped; an outer level with fewer inner levels
than another is padded (c = 1, b = 0: an identity row that no row of the data touches).

Used whenever the term with the most levels is nested in another term (every level of it within one level of the
other) and padding at most doubles the big part (:func:`find_nested`); otherwise the big part is that one term
(r = 1: D diagonal). Every array carries the batch as its first axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class NestedLevels:
    """Term ``inner`` nested in term ``outer`` (indices into the model's terms): inner level l lies in outer level
    ``parent[l]`` at position ``slot[l]`` (1..r-1) of that level's block."""

    inner: int
    outer: int
    parent: np.ndarray
    slot: np.ndarray
    r: int


def find_nested(codes: list, sizes: list) -> NestedLevels | None:
    """The term with the most levels nested in another term, from the rows' level codes (per term, codes
    0..size-1), or None. Among several outer terms the one with the most levels; an outer term whose blocks would
    more than double the big part by padding (very unequal numbers of inner levels per outer level) is skipped."""
    if len(sizes) < 2:
        return None
    b = int(np.argmax(sizes))
    inner = np.asarray(codes[b])
    best = None
    for a in range(len(sizes)):
        if a == b:
            continue
        outer = np.asarray(codes[a])
        parent = np.full(sizes[b], -1, dtype=np.int64)
        parent[inner] = outer
        if (parent < 0).any() or not np.array_equal(parent[inner], outer):
            continue  # an inner level in two outer levels (or a level without rows)
        counts = np.bincount(parent, minlength=sizes[a])
        r = int(counts.max()) + 1
        if sizes[a] * r > 2 * (sizes[a] + sizes[b]):
            continue
        if best is None or sizes[a] > sizes[best[0]]:
            best = (a, parent, counts, r)
    if best is None:
        return None
    a, parent, counts, r = best
    order = np.argsort(parent, kind="stable")
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.empty(len(parent), dtype=np.int64)
    slot[order] = np.arange(len(parent)) - start[parent[order]] + 1
    return NestedLevels(b, a, parent, slot, r)


def _slot_sum(v):
    """v (B, m, r - 1, ...) summed over its slots (axis 2): a few whole-array additions (numpy's reduction over a
    short middle axis is slow)."""
    if v.shape[2] == 0:
        return np.zeros(v.shape[:2] + v.shape[3:])
    out = v[:, :, 0].copy()
    for sl in range(1, v.shape[2]):
        out += v[:, :, sl]
    return out


@dataclass
class Factor:
    """L L' of a batch by blocks (module docstring): the big part's arrowhead blocks (a, b, c; s their Schur
    complements), the cross block B to the other terms' levels (its rows at the outer positions ``Bo``, at the inner
    ones ``Bi``; None without other terms) and the dense Schur complement ``S`` (None without other terms)."""

    a: np.ndarray  # (B, m)
    b: np.ndarray  # (B, m, r - 1)
    c: np.ndarray  # (B, m, r - 1)
    s: np.ndarray  # (B, m): a - sum b^2 / c
    Bo: np.ndarray | None  # (B, m, q2)
    Bi: np.ndarray | None  # (B, m, r - 1, width): slot l's columns LaplaceBlocks.cols[l]
    S: np.ndarray | None  # (B, q2, q2)

    _names = ("a", "b", "c", "s", "Bo", "Bi", "S")

    def take(self, ok) -> Factor:
        """The responses ``ok`` of the batch."""
        return Factor(*(None if getattr(self, n) is None else getattr(self, n)[ok] for n in self._names))

    def put(self, idx, other: Factor) -> None:
        """Set the responses ``idx`` of the batch to ``other``'s."""
        for name in self._names:
            v = getattr(self, name)
            if v is not None:
                v[idx] = getattr(other, name)


class LaplaceBlocks:
    """The block structure of a random-intercept model's L L' (module docstring) from its rows' level codes (per
    term, the largest first or not) and the terms' numbers of levels; modes and right-hand sides are in the terms'
    order (term 0's levels, then term 1's, ...)."""

    def __init__(self, codes: list, sizes: list, nested: bool = True):
        self.codes = [np.asarray(c, dtype=np.int64) for c in codes]
        self.sizes = [int(m) for m in sizes]
        self.K = len(sizes)
        self.offs = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.q = int(self.offs[-1])
        plan = find_nested(self.codes, self.sizes) if nested else None
        self.plan = plan
        self.outer = plan.outer if plan else int(np.argmax(self.sizes))
        self.inner = plan.inner if plan else None
        self.r = plan.r if plan else 1
        self.m = self.sizes[self.outer]
        self.others = [k for k in range(self.K) if k not in (self.outer, self.inner)]
        loc, start = {}, 0
        for k in self.others:
            loc[k] = self.codes[k] + start
            start += self.sizes[k]
        self.loc, self.q2 = loc, start  # a row's position among the dense levels, per other term
        self.pos_others = (np.concatenate([np.arange(self.offs[k], self.offs[k + 1]) for k in self.others])
                           if self.others else np.zeros(0, dtype=np.int64))
        self.sl_outer = slice(self.offs[self.outer], self.offs[self.outer + 1])
        self.row_o = self.codes[self.outer]
        # flat indices (np.take is much faster than fancy indexing with several index arrays): an inner level's
        # position among the (outer level, slot) pairs; the row's pair; the row's (pair or outer level, dense level)
        if plan is not None:
            r1 = self.r - 1
            self.sl_inner = slice(self.offs[self.inner], self.offs[self.inner + 1])
            self.inner_flat = plan.parent * r1 + plan.slot - 1
            gather = np.full(self.m * r1, len(plan.parent), dtype=np.int64)  # pads: a zero appended
            gather[self.inner_flat] = np.arange(len(plan.parent))
            self.gather, self.padded = gather, bool((gather == len(plan.parent)).any())
            self.row_flat = self.row_o * r1 + plan.slot[self.codes[self.inner]] - 1
        # the dense levels each slot's rows touch (a system's runs for system:item in item): the cross block's rows
        # at slot l are stored only in the columns cols[l] (Factor.Bi: B x m x (r - 1) x width, padded with zeros)
        self.cols, self.width, self.row_local = [], 0, {}
        if plan is not None and self.others:
            slot_row = self.row_flat % r1
            dense = np.concatenate([self.loc[k] for k in self.others])
            slot_all = np.tile(slot_row, len(self.others))
            self.cols = [np.unique(dense[slot_all == sl]) for sl in range(r1)]
            self.width = max(len(c) for c in self.cols)
            local = np.full((r1, self.q2), -1, dtype=np.int64)
            for sl, c in enumerate(self.cols):
                local[sl, c] = np.arange(len(c))
            self.row_local = {k: local[slot_row, self.loc[k]] for k in self.others}
        self.term_of = np.concatenate([np.full(self.sizes[k], k) for k in self.others]).astype(np.int64) \
            if self.others else np.zeros(0, dtype=np.int64)  # the term of each dense level
        self.row_dense = {k: (self.row_o * self.q2 + self.loc[k],
                              None if plan is None else self.row_flat * self.q2 + self.loc[k]) for k in self.others}
        self.row_pair = {(k, j): self.loc[k] * self.q2 + self.loc[j] for k in self.others for j in self.others}
        self._keys: dict = {}

    # --- weighted counts per level and level pair, for a batch (B x n values)
    def _keyed(self, name, row_key: np.ndarray, width: int, v):
        """Per response the sums of v (B x n) by ``row_key`` (each row's index in 0..width-1): B x width. The flat
        keys of B responses (response x width + key) are cached per ``name``; those of the first B' responses are
        a prefix of them."""
        B, n = v.shape
        hit = self._keys.get(name)
        if hit is None or len(hit) < B * n:
            hit = (np.arange(B)[:, None] * width + row_key[None, :]).ravel()
            self._keys[name] = hit
        return np.bincount(hit[:B * n], weights=v.ravel(), minlength=B * width).reshape(B, width)

    def bincount(self, k: int, v, j: int | None = None):
        """Per response the sums of v over the levels of term k (B x m_k), or over the level pairs of terms k and j
        (B x m_k x m_j)."""
        if j is None:
            return self._keyed((k,), self.codes[k], self.sizes[k], v)
        out = self._keyed((k, j), self.codes[k] * self.sizes[j] + self.codes[j], self.sizes[k] * self.sizes[j], v)
        return out.reshape(v.shape[0], self.sizes[k], self.sizes[j])

    def _slots(self, v, k: int | None = None):
        """Sums of v over the inner term's levels in the blocks' layout (B, m, r - 1) - with term k: over the
        pairs of an inner level and a level of k, in the slot's columns (B, m, r - 1, width) - 0 at the pads."""
        B, m, r1 = v.shape[0], self.m, self.r - 1
        if k is None:
            return self._keyed("slots", self.row_flat, m * r1, v).reshape(B, m, r1)
        wd = self.width
        return self._keyed(("slots", k), self.row_flat * wd + self.row_local[k], m * r1 * wd, v).reshape(B, m, r1, wd)

    def _levels(self, slots):
        """Per inner level (B, m_i) from the blocks' layout (B, m, r - 1)."""
        return slots.reshape(slots.shape[0], -1).take(self.inner_flat, axis=1)

    def level_sums(self, v) -> list:
        """Per term k (the terms' order) the sums of v (B x n) over its levels (B x m_k): the outer term's from the
        inner term's where a nested pair is merged."""
        out = [None if k in (self.outer, self.inner) and self.inner is not None else self.bincount(k, v)
               for k in range(self.K)]
        if self.inner is not None:
            sl = self._slots(v)
            out[self.inner], out[self.outer] = self._levels(sl), _slot_sum(sl)
        return out

    # --- the factor
    def factor(self, theta, w):
        """The blocks of L L' at theta (B x K) with weights w (B x n), and the weighted counts per level of every
        term (B x m_k each). The counts come from one pass over the rows per other term k: the counts of the pairs
        (big part's finest level, level of k), whose margins are the counts. The Schur complement from the arrowhead
        inverse D^-1 = diag(0, 1/c) + v v' / s, v = (1, -b/c): B'D^-1 B = sum over the outer levels of
        Bi' diag(1/c) Bi + w w' / s, w = Bo - sum_l (b_l / c_l) Bi_l."""
        B = w.shape[0]
        o, i, r = self.outer, self.inner, self.r
        m, r1 = self.m, r - 1
        counts = [None] * self.K
        q2 = self.q2
        if i is not None and self.others:
            # (inner level, dense level) counts in each slot's columns, and their sums per outer level and column
            P = sum(self._slots(w, k) for k in self.others)  # (B, m, r - 1, width): the terms' columns differ
            fine = self._slots(w, self.others[0]) @ np.ones(self.width) if len(self.others) > 1 else \
                P @ np.ones(self.width)
            Po = np.zeros((B, m, q2))
            for sl, cl in enumerate(self.cols):
                Po[:, :, cl] += P[:, :, sl, :len(cl)]
            dense_counts = Po.sum(axis=1)
        elif self.others:
            Po = np.concatenate([self.bincount(o, w, k) for k in self.others], axis=2)  # (B, m, q2)
            dense_counts = Po.sum(axis=1)
            fine = Po[:, :, :self.sizes[self.others[0]]] @ np.ones(self.sizes[self.others[0]])
        else:
            fine = self._slots(w).reshape(B, -1) if i is not None else self.bincount(o, w)
        start = 0
        for k in self.others:
            counts[k] = dense_counts[:, start:start + self.sizes[k]]
            start += self.sizes[k]
        if i is not None:
            cs = fine.reshape(B, m, r1)
            counts[i], counts[o] = self._levels(cs), _slot_sum(cs)
        else:
            counts[o] = fine
        a = 1.0 + theta[:, o:o + 1] ** 2 * counts[o]
        if i is not None:
            b = (theta[:, o:o + 1] * theta[:, i:i + 1])[:, :, None] * cs
            c = 1.0 + theta[:, i:i + 1, None] ** 2 * cs  # 1 at a padded slot (no rows)
        else:
            b, c = np.zeros((B, m, 0)), np.ones((B, m, 0))
        s = a - _slot_sum(b * b / c)
        if not self.others:
            return Factor(a, b, c, s, None, None, None), counts
        th_dense = theta[:, self.term_of]  # (B, q2)
        R = np.zeros((B, q2, q2))
        diag = np.arange(q2)
        R[:, diag, diag] = 1.0 + th_dense ** 2 * dense_counts
        starts = np.concatenate([[0], np.cumsum([self.sizes[k] for k in self.others])])
        for e, k in enumerate(self.others):
            lo, hi = starts[e], starts[e + 1]
            for f, j in enumerate(self.others[e + 1:], start=e + 1):
                lo2, hi2 = starts[f], starts[f + 1]
                Pkj = (theta[:, k:k + 1] * theta[:, j:j + 1])[:, :, None] * self.bincount(k, w, j)
                R[:, lo:hi, lo2:hi2] = Pkj
                R[:, lo2:hi2, lo:hi] = np.swapaxes(Pkj, 1, 2)
        Bo = (theta[:, o:o + 1] * th_dense)[:, None, :] * Po
        if i is None:
            Bi = np.zeros((B, m, 0, 0))
            wv = Bo / np.sqrt(s)[:, :, None]
            S = R - np.swapaxes(wv, 1, 2) @ wv
            return Factor(a, b, c, s, Bo, Bi, S), counts
        th_cols = np.stack([np.pad(th_dense[:, cl], ((0, 0), (0, self.width - len(cl)))) for cl in self.cols],
                           axis=1)  # (B, r - 1, width)
        Bi = (theta[:, i:i + 1, None] * th_cols)[:, None] * P
        wv = Bo.copy()
        Bc = Bi / np.sqrt(c)[:, :, :, None]
        bc = (b / c)[:, :, :, None] * Bi
        S = R.copy()
        for sl, cl in enumerate(self.cols):
            nl = len(cl)
            wv[:, :, cl] -= bc[:, :, sl, :nl]
            X = Bc[:, :, sl, :nl]
            S[:, cl[:, None], cl[None, :]] -= np.swapaxes(X, 1, 2) @ X
        wv /= np.sqrt(s)[:, :, None]
        S -= np.swapaxes(wv, 1, 2) @ wv
        return Factor(a, b, c, s, Bo, Bi, S), counts

    @staticmethod
    def _flat(v):
        """(B, m, r - 1, c) as (B, m (r - 1), c)."""
        return v.reshape(v.shape[0], -1, v.shape[3])

    @staticmethod
    def _arrow_solve(b, c, s, g0, g1):
        """D^-1 [g0; g1] block by block (the arrowhead inverse): g0 (B, m, k), g1 (B, m, r - 1, k)."""
        bc = (b / c)[:, :, :, None]
        x0 = (g0 - _slot_sum(bc * g1)) / s[:, :, None]
        x1 = (g1 - b[:, :, :, None] * x0[:, :, None]) / c[:, :, :, None]
        return x0, x1

    def logdet(self, fac: Factor):
        """log det(L L') per response (NaN where L L' is not positive definite)."""
        out = np.log(fac.s).sum(axis=1) + np.log(fac.c).sum(axis=(1, 2))
        bad = ~(fac.s > 0).all(axis=1)
        if fac.S is not None:
            sign, ld = np.linalg.slogdet(fac.S)
            out = out + ld
            bad |= sign <= 0
        return np.where(bad, np.nan, out)

    def solve(self, fac: Factor, g):
        """(L L')^-1 g for g of shape (B, q) or (B, q, c), in the terms' order: y = D^-1 g on the big part, the
        dense levels x2 = S^-1 (g2 - B'y), then the big part y - D^-1 B x2."""
        vec = g.ndim == 2
        g = g[:, :, None] if vec else g
        B, cols = g.shape[0], g.shape[2]
        g0 = g[:, self.sl_outer]
        if self.inner is not None:
            gi = g[:, self.sl_inner]
            if self.padded:
                gi = np.concatenate([gi, np.zeros((B, 1, cols))], axis=1)
            g1 = gi.take(self.gather, axis=1).reshape(B, self.m, self.r - 1, cols)
        else:
            g1 = np.zeros((B, self.m, 0, cols))
        y0, y1 = self._arrow_solve(fac.b, fac.c, fac.s, g0, g1)
        out = np.empty_like(g)
        if fac.S is not None:
            rhs = g[:, self.pos_others] - np.swapaxes(fac.Bo, 1, 2) @ y0
            for sl, cl in enumerate(self.cols):
                rhs[:, cl] -= np.swapaxes(fac.Bi[:, :, sl, :len(cl)], 1, 2) @ y1[:, :, sl]
            x2 = np.linalg.solve(fac.S, rhs)
            bx = np.empty_like(y1)
            for sl, cl in enumerate(self.cols):
                bx[:, :, sl] = fac.Bi[:, :, sl, :len(cl)] @ x2[:, cl]
            z0, z1 = self._arrow_solve(fac.b, fac.c, fac.s, fac.Bo @ x2, bx)
            y0, y1 = y0 - z0, y1 - z1
            out[:, self.pos_others] = x2
        out[:, self.sl_outer] = y0
        if self.inner is not None:
            out[:, self.sl_inner] = self._flat(y1).take(self.inner_flat, axis=1)
        return out[:, :, 0] if vec else out

    def diag_terms(self, theta, fac: Factor) -> list:
        """Per term k (the terms' order) and row i: [(L L')^-1 Lambda' z_i] at row i's level of term k (B x n
        each), from the blocks of the inverse: D^-1 + X S^-1 X' on the big part, -X S^-1 across, S^-1 on the
        dense levels (X = D^-1 B), at the positions each row uses."""
        o, i = self.outer, self.inner
        B = theta.shape[0]
        ro = self.row_o
        s_row = fac.s.take(ro, axis=1)
        Q = [None] * self.K
        th = [theta[:, k:k + 1] for k in range(self.K)]
        # D^-1 at the row's positions: (0, 0) 1/s; (0, l) -b/(c s); (l, l) 1/c + b^2/(c^2 s)
        m00 = 1.0 / s_row
        if i is not None:
            rf = self.row_flat
            b_row, c_row = fac.b.reshape(B, -1).take(rf, axis=1), fac.c.reshape(B, -1).take(rf, axis=1)
            m0l = -b_row / (c_row * s_row)
            mll = 1.0 / c_row + b_row * b_row / (c_row * c_row * s_row)
        if fac.S is not None:
            Sinv = np.linalg.inv(fac.S)
            Bi = np.zeros((B, self.m, self.r - 1, self.q2))  # the cross block's inner rows in all columns
            for sl, cl in enumerate(self.cols):
                Bi[:, :, sl, cl] = fac.Bi[:, :, sl, :len(cl)]
            Xo, Xi = self._arrow_solve(fac.b, fac.c, fac.s, fac.Bo, Bi)  # X = D^-1 B
            Fo = Xo @ Sinv  # (B, m, q2)
            m00 = m00 + np.einsum("bmj,bmj->bm", Fo, Xo).take(ro, axis=1)
            if i is not None:
                Fi = (self._flat(Xi) @ Sinv).reshape(Xi.shape)
                m0l = m0l + np.einsum("bmlj,bmj->bml", Xi, Fo).reshape(B, -1).take(rf, axis=1)
                mll = mll + np.einsum("bmlj,bmlj->bml", Fi, Xi).reshape(B, -1).take(rf, axis=1)
            Fo, Sinv = Fo.reshape(B, -1), Sinv.reshape(B, -1)
            Fi = Fi.reshape(B, -1) if i is not None else None
        Q[o] = th[o] * m00 + (th[i] * m0l if i is not None else 0.0)
        if i is not None:
            Q[i] = th[o] * m0l + th[i] * mll
        for k in self.others:
            at_o, at_i = self.row_dense[k]
            cross_o = -Fo.take(at_o, axis=1)
            Q[o] = Q[o] + th[k] * cross_o
            qk = th[o] * cross_o
            if i is not None:
                cross_i = -Fi.take(at_i, axis=1)
                Q[i] = Q[i] + th[k] * cross_i
                qk = qk + th[i] * cross_i
            for j in self.others:
                qk = qk + th[j] * Sinv.take(self.row_pair[k, j], axis=1)
            Q[k] = qk
        return Q


__all__ = ["Factor", "LaplaceBlocks", "NestedLevels", "find_nested"]

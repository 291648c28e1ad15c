"""Random intercepts of a grouping nested in another, eliminated together: ``(1|item) + (1|system:item)``.

The engine's deviance (:mod:`.deviance`) eliminates the term with the most levels ("big", block diagonal) first and
factors the other terms' levels densely. In the runs-random model with the system-by-item term, ``score ~ system +
(1|item) + (1|system:item) + (1|system:run)``, the big term is system:item and the dense block would hold every
item: 10^4 items cost a 10^4 x 10^4 Cholesky per evaluation (issue 28). But every level of system:item lies within
one item, so the two terms are one block-diagonal term over the items: for item i, the columns [1, 1{system = 1},
..., 1{system = k}] (its intercept and the indicators of its system:item levels) with the relative covariance
factor T = diag(theta_item, theta_si, ..., theta_si). The model, and so the deviance, is the same (Z's columns are
only regrouped; a system:item level that is not observed is a zero column, which changes nothing); the dense block
keeps only the other terms (system:run: 2 x 50 levels). The merged term is handled by :class:`.deviance.BlockDeviance`
(per-level (k + 1) x (k + 1) blocks) with theta tied: :class:`NestedDeviance` presents it in the original terms'
theta, with the chain rule for the gradient.

Used when a random intercept with the most levels is nested in another random intercept whose levels would make the
dense block large (more than :data:`MIN_DENSE` levels) and each outer level holds at most :data:`MAX_INNER` inner
levels: by the fit (:func:`deviance`), Satterthwaite's df (:mod:`.satterthwaite`) and Kenward-Roger's
(:mod:`.kenward_roger`, through :func:`block_view`), all from the sufficient statistics.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import sparse

from ..structure.formula import RandomTerm
from .deviance import BlockDeviance, Deviance

MIN_DENSE = 500  # levels of the outer term from which merging pays (its dense block: MIN_DENSE^2 doubles)
MAX_INNER = 8  # inner levels per outer level up to which the merged blocks stay small


@dataclass
class NestedPlan:
    """Term ``inner`` (intercept, the most levels) nested in term ``outer`` (intercept): each inner level l lies in
    outer level ``parent[l]`` at position ``slot[l]`` (1..k) of the merged block of r = k + 1 columns."""

    inner: int
    outer: int
    parent: np.ndarray
    slot: np.ndarray
    r: int


def _cross(s, k: int, j: int):
    return s.ZtZ_cross[(k, j)] if k < j else s.ZtZ_cross[(j, k)].T


def find(s) -> NestedPlan | None:
    """The nested pair that merging helps (module docstring), or None; found once per statistics object (the fits
    and tests of one model share the plan and its merged statistics, :func:`merged`)."""
    if "_nested_plan" not in s.__dict__:
        s._nested_plan = _find(s)
    return s._nested_plan


def merged(s, plan: NestedPlan):
    """:func:`block_stats` of ``s`` with ``plan`` (:func:`find`'s), made once per statistics object."""
    got = s.__dict__.get("_nested_block")
    if got is None or got[0] is not plan:
        got = s._nested_block = (plan, block_stats(s, plan))
    return got[1]


def _find(s) -> NestedPlan | None:
    if len(s.terms) < 2:
        return None
    sizes = s.sizes
    widths = [m * t.r for m, t in zip(sizes, s.terms, strict=True)]
    b = max(range(len(sizes)), key=lambda k: (sizes[k], s.terms[k].r))
    if not s.terms[b].intercept_only:
        return None
    best = None
    for a, t in enumerate(s.terms):
        if a == b or not t.intercept_only or widths[a] < MIN_DENSE:
            continue
        G = sparse.csc_matrix(_cross(s, a, b))  # outer levels x inner levels, counts
        if not (np.diff(G.indptr) == 1).all():  # every inner level in exactly one outer level
            continue
        parent = G.indices[G.indptr[:-1]].astype(np.int64)
        counts = np.bincount(parent, minlength=sizes[a])
        if counts.max(initial=0) > MAX_INNER:
            continue
        if best is None or sizes[a] > sizes[best[0]]:
            best = (a, parent, counts)
    if best is None:
        return None
    a, parent, counts = best
    order = np.argsort(parent, kind="stable")
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.empty(len(parent), dtype=np.int64)
    slot[order] = np.arange(len(parent)) - start[parent[order]] + 1
    return NestedPlan(b, a, parent, slot, int(counts.max()) + 1)


def _rows(plan: NestedPlan, m_outer: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the merged term's columns (level-major, r per outer level) of the outer and of the inner levels."""
    return np.arange(m_outer) * plan.r, plan.parent * plan.r + plan.slot


def block_stats(s, plan: NestedPlan):
    """The model's sufficient statistics with the nested pair merged into one term (module docstring): terms in the
    original order with the merged term at the outer term's place and the inner term removed."""
    a, b, r = plan.outer, plan.inner, plan.r
    m = s.sizes[a]
    ra, rb = _rows(plan, m)
    keep = [k for k in range(len(s.terms)) if k != b]  # new term j is old term keep[j]; a is the merged one
    D = np.zeros((m, r, r))
    D[:, 0, 0] = s.ZtZ_diag[a][:, 0, 0]
    nb = s.ZtZ_diag[b][:, 0, 0]
    D[plan.parent, 0, plan.slot] = nb
    D[plan.parent, plan.slot, 0] = nb
    D[plan.parent, plan.slot, plan.slot] = nb

    def stack(va, vb):
        out = np.zeros((m * r,) + va.shape[1:])
        out[ra] = va
        out[rb] = vb
        return out

    def stack_rows(Ma, Mb):
        Ma, Mb = sparse.csr_matrix(Ma), sparse.csr_matrix(Mb)
        rows = np.concatenate([ra, rb])
        P = sparse.csr_matrix((np.ones(len(rows)), (rows, np.arange(len(rows)))), shape=(m * r, len(rows)))
        return (P @ sparse.vstack([Ma, Mb], format="csr")).tocsr()

    new = {j: k for j, k in enumerate(keep)}
    ZtX = [stack(s.ZtX[a], s.ZtX[b]) if k == a else s.ZtX[k] for k in keep]
    Zty = [stack(s.Zty[a], s.Zty[b]) if k == a else s.Zty[k] for k in keep]
    diag = [D if k == a else s.ZtZ_diag[k] for k in keep]
    cross = {}
    for j in range(len(keep)):
        for i in range(j + 1, len(keep)):
            kj, ki = new[j], new[i]
            if kj == a:
                cross[(j, i)] = stack_rows(_cross(s, a, ki), _cross(s, b, ki))
            elif ki == a:
                cross[(j, i)] = stack_rows(_cross(s, a, kj), _cross(s, b, kj)).T.tocsr()
            else:
                cross[(j, i)] = sparse.csr_matrix(_cross(s, kj, ki))
    term = RandomTerm(covariates=((),) + tuple((f"[{s.groups[b]} {c}]",) for c in range(1, r)),
                      group=s.terms[a].group)
    terms = [term if k == a else s.terms[k] for k in keep]
    levels = [s.levels[k] for k in keep]
    groups = [f"{s.groups[a]}+{s.groups[b]}" if k == a else s.groups[k] for k in keep]
    order = sorted(range(len(keep)), key=lambda j: -len(levels[j]))
    return replace(s, terms=terms, groups=groups, levels=levels, ZtZ_diag=diag, ZtZ_cross=cross, ZtX=ZtX,
                   Zty=Zty, lme4_order=order)


class NestedDeviance:
    """The profiled deviance of a model with a merged nested pair (module docstring), with the interface of
    :class:`.deviance.BlockDeviance` in the original terms' theta (one element per random intercept; the other
    terms' lower triangles as BlockDeviance has them). ``inner`` is the BlockDeviance of :func:`block_stats`."""

    def __init__(self, s, reml: bool, plan: NestedPlan):
        self.s, self.reml, self.plan = s, reml, plan
        self.block = merged(s, plan)
        self.inner = BlockDeviance(self.block, reml)
        keep = [k for k in range(len(s.terms)) if k != plan.inner]
        self.position = {k: j for j, k in enumerate(keep)}  # old term -> merged term index
        self.tri, self.tslices, lower = [], [], []
        start = 0
        for k in range(len(s.terms)):
            if k in (plan.inner, plan.outer):
                rows, cols = np.array([0]), np.array([0])
            else:
                rows, cols = self.inner.tri[self.position[k]]
            self.tri.append((rows, cols))
            self.tslices.append(slice(start, start + len(rows)))
            lower += [0.0 if rr == c else -np.inf for rr, c in zip(rows, cols, strict=True)]
            start += len(rows)
        self.n_theta = start
        self.lower = np.array(lower)
        M = np.zeros((self.inner.n_theta, self.n_theta))  # block theta = M theta
        j = self.position[plan.outer]
        rows, cols = self.inner.tri[j]
        sl = self.inner.tslices[j]
        for e, (rr, c) in enumerate(zip(rows, cols, strict=True)):
            if rr == c:
                src = plan.outer if c == 0 else plan.inner
                M[sl.start + e, self.tslices[src].start] = 1.0
        for k in range(len(s.terms)):
            if k in (plan.inner, plan.outer):
                continue
            sl_in = self.inner.tslices[self.position[k]]
            M[sl_in, self.tslices[k]] = np.eye(sl_in.stop - sl_in.start)
        self.M = M
        self.q_o = self.inner.q_o

    def start(self) -> np.ndarray:
        x = np.zeros(self.n_theta)
        for k, (rows, cols) in enumerate(self.tri):
            x[self.tslices[k]] = (rows == cols).astype(float)
        return x

    def expand(self, theta) -> np.ndarray:
        """The merged model's theta from the original terms' theta."""
        return self.M @ np.asarray(theta, dtype=float)

    def lambdas(self, theta) -> list[np.ndarray]:
        inner = self.inner.lambdas(self.expand(theta))
        out = []
        for k in range(len(self.s.terms)):
            if k in (self.plan.inner, self.plan.outer):
                out.append(np.array([[float(theta[self.tslices[k].start])]]))
            else:
                out.append(inner[self.position[k]])
        return out

    def evaluate(self, theta):
        return self.inner.evaluate(self.expand(theta))

    def __call__(self, theta) -> float:
        return self.inner(self.expand(theta))

    def value_and_grad(self, theta):
        value, grad = self.inner.value_and_grad(self.expand(theta))
        return value, self.M.T @ grad

    def gradient(self, theta, parts) -> np.ndarray:
        return self.M.T @ self.inner.gradient(self.expand(theta), parts)

    def conditional_modes(self, theta, parts, beta) -> list[np.ndarray]:
        modes = self.inner.conditional_modes(self.expand(theta), parts, beta)
        merged = modes[self.position[self.plan.outer]]  # outer levels x r
        out = []
        for k in range(len(self.s.terms)):
            if k == self.plan.outer:
                out.append(merged[:, :1].copy())
            elif k == self.plan.inner:
                out.append(merged[self.plan.parent, self.plan.slot][:, None])
            else:
                out.append(modes[self.position[k]])
        return out


def deviance(s, reml: bool):
    """The deviance object for a model's statistics: :class:`NestedDeviance` where a nested pair is merged (module
    docstring), else :class:`.deviance.Deviance` (random intercepts) or :class:`.deviance.BlockDeviance`."""
    plan = find(s)
    if plan is not None:
        return NestedDeviance(s, reml, plan)
    return Deviance(s, reml) if s.intercepts_only else BlockDeviance(s, reml)


@dataclass
class BlockView:
    """A model's random terms as Kenward-Roger's test sees them (:mod:`.kenward_roger`): ``s`` the statistics (with a
    nested pair merged), ``theta`` the fit's theta in that model's internal order, and ``patterns`` per variance
    parameter of the original model (pbkrtest's order: lme4's order of the terms, per term the lower triangle of its
    covariance) the term of ``s`` it belongs to, its r x r pattern E (V = sum_i gamma_i Z_k (I (x) E_i) Z_k' +
    sigma^2 I) and its name."""

    s: object
    theta: np.ndarray
    patterns: list


def block_view(s, theta) -> BlockView | None:
    """The merged form of a fit for Kenward-Roger's test (``theta``: the fit's, in the engine's internal order), or
    None when no nested pair is merged."""
    plan = find(s)
    if plan is None:
        return None
    dev = NestedDeviance(s, True, plan)
    merged = dev.position[plan.outer]
    patterns = []
    for k in s.lme4_order:
        t = s.terms[k]
        if k in (plan.outer, plan.inner):
            e = np.zeros((plan.r, plan.r))
            if k == plan.outer:
                e[0, 0] = 1.0
            else:
                e[np.arange(1, plan.r), np.arange(1, plan.r)] = 1.0
            patterns.append((merged, e, f"{s.groups[k]}: var((Intercept))"))
            continue
        cn = t.covariate_names
        for c in range(t.r):
            for rr in range(c, t.r):
                e = np.zeros((t.r, t.r))
                e[rr, c] = e[c, rr] = 1.0
                name = f"{s.groups[k]}: var({cn[c]})" if rr == c else f"{s.groups[k]}: cov({cn[c]}, {cn[rr]})"
                patterns.append((dev.position[k], e, name))
    return BlockView(dev.block, dev.expand(np.asarray(theta, dtype=float)), patterns)


__all__ = ["BlockView", "NestedDeviance", "NestedPlan", "block_stats", "block_view", "deviance", "find", "merged"]

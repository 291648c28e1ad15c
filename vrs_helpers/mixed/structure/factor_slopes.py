"""Random slopes of factors, as lme4 codes them: the factor's columns of R's model matrix become numeric slope
variables of the random term, so the engine fits them as it fits numeric slopes (lme4, Bates et al. 2015, sec. 2.2:
the random-effects model matrix of a term is ``model.matrix`` of its left side, per level of the grouping factor).

- ``(f|g)`` = ``(1 + f|g)``: the intercept and the k - 1 treatment contrasts of f (``fB``, ``fC``: the factor's
  name pasted to the level, R's names), one correlated block;
- ``(0 + f|g)``: one column per level (``fA``, ``fB``, ``fC``), correlated;
- ``(1 + x + f|g)``: numeric and factor variables mixed, in R's column order;
- ``(f||g)``: as lme4 1.1 expands ``||`` (``expandDoubleVerts``): ``(1|g) + (0 + f|g)``, i.e. an uncorrelated
  intercept plus a *correlated* block of all k level columns. afex's ``mixed(..., expand_re = TRUE)`` instead
  turns each contrast into its own numeric variable, so that ``||`` gives k - 1 uncorrelated slopes; write that
  model here with numeric 0/1 columns and ``(1 + fB + fC||g)``;
- ``(1|g) + (1|g:f)`` is not a slope and stays as it is.

Levels are R's: the categories of a pandas Categorical (unused ones dropped), else the sorted values. Interactions
involving a factor inside a random term (``(1 + f:x|g)``) are refused with a message.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .design import is_factor
from .errors import MixedModelError
from .formula import parse

_IDENT = re.compile(r"^[A-Za-z_.][A-Za-z0-9_.]*$")
_RANDOM_TERM = re.compile(r"\(([^()|]*)(\|\|?)([^()|]*)\)")  # a random term, as formula.parse reads it


def factor_levels(s: pd.Series) -> list:
    """R's level order: a Categorical's categories (the ones that occur), else the sorted distinct values."""
    present = s.dropna()
    if isinstance(s.dtype, pd.CategoricalDtype):
        used = set(present.unique())
        return [c for c in s.cat.categories if c in used]
    values = present.unique().tolist()
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=str)


def _quote(name: str) -> str:
    return name if _IDENT.match(name) else f"`{name}`"


def expand(formula: str, data: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """``(formula, data)`` with every factor slope replaced by numeric indicator columns named as lme4 names them
    (module docstring). Returns the inputs unchanged when no random term has a factor slope."""
    f = parse(formula)
    factors = {v for t in f.random_terms for v in t.variables if v in data.columns and is_factor(data[v])}
    if not factors:
        return formula, data
    new_cols: dict[str, np.ndarray] = {}
    pieces = []
    for t in f.random_terms:
        if not any(v in factors for v in t.variables):
            pieces.append(str(t))
            continue
        columns: list[str] = []
        intercept = () in t.covariates
        full_first = not intercept  # R: without an intercept the first factor gets all its levels
        for c in t.covariates:
            if c == ():
                continue
            if len(c) > 1 and any(v in factors for v in c):
                raise MixedModelError(f"The random term {t} has the interaction {':'.join(c)} of a factor: random "
                                      "slopes of factor interactions are not fitted. Code the interaction as numeric "
                                      "0/1 columns, or use a random intercept of the interaction, "
                                      f"(1|{t.group_name}:{':'.join(c)}).")
            v = c[0]
            if v not in factors:
                columns.append(v)
                continue
            levels = factor_levels(data[v])
            if len(levels) < 2:
                raise MixedModelError(f"The factor {v!r} in the random term {t} has {len(levels)} level(s): a slope "
                                      "needs at least two. Drop it from the random term.")
            use = levels if full_first else levels[1:]
            full_first = False
            values = data[v].to_numpy()
            for lev in use:
                name = f"{v}{lev}"
                if name in data.columns and name not in new_cols:
                    raise MixedModelError(f"The random term {t} codes factor {v!r} as column {name!r} (lme4's "
                                          f"name), but the data already have a column {name!r}; rename it.")
                new_cols[name] = (values == lev).astype(float)
                columns.append(name)
        lhs = ["1" if intercept else "0"] + [_quote(cname) for cname in columns]
        pieces.append(f"({' + '.join(lhs)} | {t.group_name})")
    lhs_text, rhs = formula.split("~", 1)
    fixed = _RANDOM_TERM.sub(" ", rhs).strip()
    fixed = re.sub(r"\+\s*(\+\s*)+", "+ ", fixed).strip().strip("+").strip() or "1"
    text = f"{lhs_text.strip()} ~ {fixed} + {' + '.join(pieces)}"
    nan = data[list(factors)].isna().any(axis=1).to_numpy()
    expanded = data.assign(**{k: np.where(nan, np.nan, col) for k, col in new_cols.items()})
    return text, expanded

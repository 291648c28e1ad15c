"""Parse lme4-style model formulas: ``y ~ a * b + x + (1|g) + (1|g:h)`` (random intercepts only)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass


class FormulaError(ValueError):
    """The formula cannot be parsed or asks for something the engine does not fit."""


@dataclass(frozen=True)
class Formula:
    """A parsed formula: response, fixed-effect terms (tuples of variable names), random intercept groupings."""

    response: str
    intercept: bool
    fixed_terms: tuple[tuple[str, ...], ...]  # in R's order: by degree, then order of appearance
    random: tuple[tuple[str, ...], ...]  # each a grouping: ("sentence",) or ("sentence", "rater")
    text: str

    @property
    def fixed_variables(self) -> list[str]:
        return list(dict.fromkeys(v for t in self.fixed_terms for v in t))

    @property
    def random_variables(self) -> list[str]:
        return list(dict.fromkeys(v for g in self.random for v in g))

    @staticmethod
    def group_name(group: tuple[str, ...]) -> str:
        return ":".join(group)


_RANDOM = re.compile(r"\(([^()|]*)\|([^()]*)\)")
_NAME = re.compile(r"^[A-Za-z_.][A-Za-z0-9_.]*$|^`[^`]+`$")


def _clean(name: str) -> str:
    name = name.strip()
    if not _NAME.match(name):
        raise FormulaError(f"{name!r} is not a variable name (use backticks for names with spaces or symbols).")
    return name.strip("`")


def parse(text: str) -> Formula:
    """Parse an lme4 formula with random intercepts.

    Supported: ``+`` between terms, ``a:b`` interactions, ``a*b`` (main effects and all interactions), ``1`` /
    ``0`` / ``-1`` for the intercept, ``(1|g)`` and ``(1|g:h)`` random intercepts. Random slopes such as
    ``(x|g)`` or ``(1 + x|g)`` are rejected.
    """
    if not isinstance(text, str) or "~" not in text:
        raise FormulaError(f"A formula needs a response and '~', like 'ter ~ system + (1|sentence_id)'; got {text!r}.")
    lhs, rhs = text.split("~", 1)
    response = _clean(lhs)
    random = []
    for inner, group in _RANDOM.findall(rhs):
        if inner.replace(" ", "") != "1":
            raise FormulaError(
                f"Random slopes are not supported: ({inner.strip()}|{group.strip()}). This engine fits random "
                f"intercepts only, e.g. (1|{group.strip()}); model a slope as a fixed interaction instead.")
        if "/" in group:
            raise FormulaError(f"Nesting syntax (1|{group.strip()}) is not supported; write (1|a) + (1|a:b).")
        g = tuple(_clean(v) for v in group.split(":"))
        if g in random:
            raise FormulaError(f"The random term (1|{':'.join(g)}) appears twice.")
        random.append(g)
    fixed_text = _RANDOM.sub(" ", rhs)
    if "|" in fixed_text or "(" in fixed_text:
        raise FormulaError(f"Cannot parse the random part of {text!r}: write random intercepts as (1|group).")
    intercept = True
    terms: list[tuple[str, ...]] = []
    fixed_text = fixed_text.replace("- 1", "+ 0").replace("-1", "+0")
    if "-" in fixed_text:
        raise FormulaError(f"Removing terms with '-' is not supported (only '- 1'): {text!r}.")
    for chunk in fixed_text.split("+"):
        chunk = chunk.strip()
        if not chunk:
            continue
        if chunk == "1":
            continue
        if chunk == "0":
            intercept = False
            continue
        if "*" in chunk:
            parts = [tuple(_clean(v) for v in p.split(":")) for p in chunk.split("*")]
            for r in range(1, len(parts) + 1):
                for combo in itertools.combinations(parts, r):
                    terms.append(tuple(dict.fromkeys(v for p in combo for v in p)))
        else:
            terms.append(tuple(_clean(v) for v in chunk.split(":")))
    unique: list[tuple[str, ...]] = []
    for t in terms:
        if frozenset(t) not in {frozenset(u) for u in unique}:
            unique.append(t)
    unique.sort(key=len)  # stable: R orders terms by degree, then by appearance
    if not random:
        raise FormulaError(f"No random intercept in {text!r}: add at least one term like (1|sentence_id) "
                           f"(for a model without random effects use statsmodels OLS).")
    return Formula(response, intercept, tuple(unique), tuple(random), text)

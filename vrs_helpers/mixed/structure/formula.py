"""Parse lme4-style model formulas: ``y ~ a * b + x + (1|g) + (1 + x|h) + (1|g:h) + (1|s/c)``.

Random terms follow lme4 (Bates et al. 2015, section 2.1): ``(1|g)`` a random intercept, ``(x|g)`` = ``(1 + x|g)``
a random intercept and slope in the numeric variable ``x`` with their correlation, ``(0 + x|g)`` a slope only,
``(1 + x||g)`` uncorrelated intercept and slope (expanded into ``(1|g) + (0 + x|g)``), ``(1|a/b)`` nested groupings
(expanded into ``(1|b:a) + (1|a)``, lme4's order and names).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from ...errors import VRSError


class FormulaError(VRSError, ValueError):
    """The formula cannot be parsed or asks for something the engine does not fit."""


@dataclass(frozen=True)
class RandomTerm:
    """One random-effects term: the covariates whose coefficients vary by ``group`` (``()`` is the intercept)."""

    covariates: tuple[tuple[str, ...], ...]  # in R's model-matrix order: () first, then by degree and appearance
    group: tuple[str, ...]  # ("subject",) or ("class", "school") for class:school

    @property
    def group_name(self) -> str:
        return ":".join(self.group)

    @property
    def covariate_names(self) -> list[str]:
        return ["(Intercept)" if c == () else ":".join(c) for c in self.covariates]

    @property
    def r(self) -> int:
        """Number of random coefficients per level."""
        return len(self.covariates)

    @property
    def intercept_only(self) -> bool:
        return self.covariates == ((),)

    @property
    def variables(self) -> list[str]:
        return list(dict.fromkeys(v for c in self.covariates for v in c))

    def __str__(self) -> str:
        names = self.covariate_names
        if () not in self.covariates:
            names = ["0"] + names
        return f"({' + '.join('1' if n == '(Intercept)' else n for n in names)} | {self.group_name})"


@dataclass(frozen=True)
class Formula:
    """A parsed formula: response, fixed-effect terms (tuples of variable names) and random terms."""

    response: str
    intercept: bool
    fixed_terms: tuple[tuple[str, ...], ...]  # in R's order: by degree, then order of appearance
    random_terms: tuple[RandomTerm, ...]
    text: str

    @property
    def random(self) -> tuple[tuple[str, ...], ...]:
        """The grouping of every random term (tuples of variable names), in the order of the terms."""
        return tuple(t.group for t in self.random_terms)

    @property
    def intercepts_only(self) -> bool:
        """True when every random term is a random intercept (no slopes)."""
        return all(t.intercept_only for t in self.random_terms)

    @property
    def fixed_variables(self) -> list[str]:
        return list(dict.fromkeys(v for t in self.fixed_terms for v in t))

    @property
    def random_variables(self) -> list[str]:
        """The grouping variables of the random terms."""
        return list(dict.fromkeys(v for g in self.random for v in g))

    @property
    def random_covariates(self) -> list[str]:
        """The variables whose coefficients vary by group (random slopes)."""
        return list(dict.fromkeys(v for t in self.random_terms for v in t.variables))

    @staticmethod
    def group_name(group: tuple[str, ...]) -> str:
        return ":".join(group)


_RANDOM = re.compile(r"\(([^()|]*)(\|\|?)([^()|]*)\)")
_NAME = re.compile(r"^[A-Za-z_.][A-Za-z0-9_.]*$|^`[^`]+`$")


def _clean(name: str) -> str:
    name = name.strip()
    if not _NAME.match(name):
        raise FormulaError(f"{name!r} is not a variable name (use backticks for names with spaces or symbols).")
    return name.strip("`")


def _terms(text: str, where: str) -> tuple[bool, list[tuple[str, ...]]]:
    """Terms of a sum like ``1 + a*b + x:z - 1``: (intercept, terms in R's order: by degree, then appearance)."""
    intercept = True
    terms: list[tuple[str, ...]] = []
    text = re.sub(r"-\s*1\b", "+ 0", text)
    if "-" in text:
        raise FormulaError(f"Removing terms with '-' is not supported (only '- 1'): {where!r}.")
    for chunk in text.split("+"):
        chunk = chunk.strip()
        if not chunk or chunk == "1":
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
    return intercept, unique


def _groups(text: str) -> list[tuple[str, ...]]:
    """``a/b/c`` -> [c:b:a, b:a, a] (lme4's expansion of nesting, in its order); ``a:b`` -> [a:b]."""
    parts = [tuple(_clean(v) for v in p.split(":")) for p in text.split("/")]
    if any(not p for p in parts):
        raise FormulaError(f"Cannot read the grouping {text.strip()!r}.")
    groups = []
    for i in range(len(parts), 0, -1):
        groups.append(tuple(v for p in reversed(parts[:i]) for v in p))
    return groups


def parse(text: str) -> Formula:
    """Parse an lme4 formula.

    Fixed part: ``+`` between terms, ``a:b`` interactions, ``a*b`` (main effects and all interactions), ``1`` /
    ``0`` / ``-1`` for the intercept. Random part: ``(1|g)``, ``(1|g:h)``, ``(1|a/b)``, ``(x|g)``, ``(1 + x|g)``,
    ``(0 + x|g)``, ``(1 + x||g)`` with numeric slope variables (checked when the data are read).
    """
    if not isinstance(text, str) or "~" not in text:
        raise FormulaError(f"A formula needs a response and '~', like 'ter ~ system + (1|sentence_id)'; got {text!r}.")
    lhs, rhs = text.split("~", 1)
    response = _clean(lhs)
    random: list[RandomTerm] = []
    for inner, bar, group in _RANDOM.findall(rhs):
        where = f"({inner.strip()}{bar}{group.strip()})"
        if not inner.strip():
            raise FormulaError(f"The random term {where} has nothing before '|': write (1|{group.strip()}).")
        intercept, covs = _terms(inner, where)
        covariates = ([()] if intercept else []) + covs
        if not covariates:
            raise FormulaError(f"The random term {where} has no coefficient (0 and nothing else).")
        for g in _groups(group):
            if bar == "||":  # lme4: one uncorrelated term per coefficient
                pieces = [RandomTerm((c,), g) for c in covariates]
            else:
                pieces = [RandomTerm(tuple(covariates), g)]
            for t in pieces:
                if t in random:
                    raise FormulaError(f"The random term {t} appears twice.")
                random.append(t)
    fixed_text = _RANDOM.sub(" ", rhs)
    if "|" in fixed_text or "(" in fixed_text:
        raise FormulaError(f"Cannot parse the random part of {text!r}: write random terms as (1|group) or "
                           f"(1 + x|group).")
    intercept, terms = _terms(fixed_text, text)
    if not random:
        raise FormulaError(f"No random term in {text!r}: add at least one term like (1|sentence_id) "
                           f"(for a model without random effects use statsmodels OLS).")
    return Formula(response, intercept, tuple(terms), tuple(random), text)

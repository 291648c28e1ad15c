"""Reading and checking your own evaluation results for workbook 07 and ``vrs analyze``.

A score table has one row per system, run and test item. It comes as a file (CSV, TSV, Parquet, JSON lines) or as a
folder of runs the way experiment logs look, given as a pattern with named fields::

    runs/{system}/seed={seed}/scores.tsv

Every file matching the pattern is read (a table with a header, or a plain file with one score per line, the
item being the line number) and the named fields become columns. :func:`validate` then checks the roles of the
columns and says what to do about anything that would make a wrong number.
"""

from __future__ import annotations

import difflib
import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..book.glrt import replication_problem
from ..errors import VRSError
from ..literal import html_text, no_math

TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".jsonl": "jsonl", ".ndjson": "jsonl",
                  ".parquet": "parquet", ".pq": "parquet"}
PLAIN_SUFFIXES = {".txt", ".score", ".scores", ""}
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class InputError(VRSError, ValueError):
    """Bad input to ``vrs analyze`` / workbook 07; the message names the column, value or file and what to do."""


def _suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2", ".xz", ".zip"):
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def _read_table(path: Path) -> pd.DataFrame:
    kind = TABLE_SUFFIXES.get(_suffix(path))
    try:
        if kind == "parquet":
            return _with_rows(pd.read_parquet(path), path)
        if kind == "jsonl":
            return _with_rows(pd.DataFrame([rec for _, rec in iter_json_lines(path)]), path)
        if kind is not None:
            return read_delimited(path, kind)
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"Could not read {path}: {exc}") from exc
    return _read_plain(path)


def _with_rows(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    if table.empty:
        cols = f" (columns: {', '.join(map(str, table.columns))})" if len(table.columns) else ""
        raise InputError(f"{path} has no data rows{cols}: give at least one row per system, run and item.")
    return table


DELIMITERS = {",": "comma", "\t": "tab", ";": "semicolon", "|": "vertical bar"}


def read_delimited(path: Path, sep: str) -> pd.DataFrame:
    """A delimited text table whose delimiter is checked: a file named ``.csv`` that is really separated by
    semicolons or tabs (a spreadsheet export in many locales) is read with the delimiter its header uses (and, with
    semicolons, numbers written with a decimal comma as numbers); ``table.attrs["delimiter"]`` records a delimiter
    other than the one the name implies. A header with no data rows is an error that says so."""
    header = pd.read_csv(path, sep=sep, nrows=0).columns
    if len(header) == 1 and isinstance(header[0], str):
        found = [d for d in DELIMITERS if d != sep and d in header[0]]
        if len(found) > 1:
            raise InputError(f"{path}: the header {header[0]!r} contains several possible delimiters "
                             f"({', '.join(DELIMITERS[d] for d in found)}) and no {DELIMITERS[sep]}: save it with "
                             "one delimiter (comma for .csv, tab for .tsv).")
        if found:
            table = pd.read_csv(path, sep=found[0])
            if found[0] == ";":
                comma = [c for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])
                         and table[c].notna().any()
                         and table[c].dropna().astype(str).str.fullmatch(r"-?\d+,\d+").all()]
                if comma:
                    table = pd.read_csv(path, sep=";", decimal=",")
            table.attrs["delimiter"] = found[0]
            return _with_rows(table, path)
    return _with_rows(pd.read_csv(path, sep=sep), path)


def iter_json_lines(path, error: type = None):
    """(line number, record) for every non-empty line of a JSON-lines file; a line that is not a JSON object is an
    error (``error``, default :class:`InputError`) naming the file and the line."""
    import json

    error = error or InputError
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise error(f"Could not read {path}: {exc}") from exc
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                text = line.strip()
                if not text:
                    continue
                try:
                    record = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise error(f"{path}, line {number}: not valid JSON ({exc.msg} at column {exc.colno}: "
                                f"{text[:60]!r}). A JSON-lines file has one JSON object per line.") from None
                if not isinstance(record, dict):
                    raise error(f"{path}, line {number}: a JSON {type(record).__name__}, not an object "
                                "({...}). A JSON-lines file has one JSON object per line.")
                yield number, record
        except UnicodeDecodeError as exc:
            raise error(f"Could not read {path}: not UTF-8 text ({exc.reason}).") from None


def _read_plain(path: Path) -> pd.DataFrame:
    """One score per line (empty lines skipped); the item is the 1-based line number."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"Could not read {path}: {exc}") from exc
    items, scores = [], []
    for i, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        try:
            scores.append(float(text))
        except ValueError:
            raise InputError(f"{path}, line {i}: {text[:40]!r} is not a number. A plain score file has one number "
                             f"per line; use a .csv/.tsv/.jsonl/.parquet extension for a table with a header. "
                             f"Supported: {', '.join(sorted(TABLE_SUFFIXES))} or plain score files.") from None
        items.append(i)
    if not scores:
        raise InputError(f"{path} is empty: no scores in it.")
    return pd.DataFrame({"item": items, "score": scores})


def _nearest_dir(glob_pattern: str) -> str:
    parts = Path(glob_pattern).parts
    for k in range(len(parts), 0, -1):
        cand = Path(*parts[:k])
        if "*" not in str(cand) and cand.is_dir():
            return str(cand)
    return "."


def match_pattern(text: str) -> list[tuple[str, dict]]:
    """The files or folders a run-folder pattern with named fields matches, e.g.
    ``runs/{system}/seed={seed}/scores.tsv``: a sorted list of (path, {field: value}). A pattern without fields
    gives [] (it is a plain path). Errors: a field named twice, no match (naming the nearest existing folder), a
    match whose field values contain '/'."""
    fields = _FIELD.findall(text)
    if not fields:
        return []
    if len(set(fields)) != len(fields):
        raise InputError(f"The pattern {text!r} names a field twice ({', '.join(fields)}); name each field once.")
    trimmed = text.rstrip("/") or text
    glob_pattern = _FIELD.sub("*", trimmed)
    pieces = _FIELD.split(trimmed)   # literal, field, literal, field, ..., literal
    regex = re.compile("^" + "".join(f"(?P<{p}>[^/]+)" if i % 2 else re.escape(p)
                                     for i, p in enumerate(pieces)) + "$")
    found = sorted(glob.glob(glob_pattern, recursive=False))
    if not found:
        raise InputError(f"The pattern {text!r} matches no file (searched {glob_pattern!r}; the nearest existing "
                         f"folder is {_nearest_dir(glob_pattern)!r}). Check the path and the field names.")
    out = []
    for f in found:
        m = regex.match(f.replace(os.sep, "/") if os.sep != "/" else f)
        if m is None:
            raise InputError(f"{f} matches the glob {glob_pattern!r} but not the pattern {text!r}: a field value "
                             "contains '/' or the fixed parts differ. Rename the file or adjust the pattern.")
        out.append((f, {name: m.group(name) for name in fields}))
    return out


def load_scores(source, *, sep: str | None = None) -> pd.DataFrame:
    """A score table from a DataFrame, a file (CSV, TSV, Parquet, JSON lines; compressed as pandas reads them), a
    folder of Parquet files, or a run-folder pattern with named fields, e.g. ``runs/{system}/seed={seed}/scores.tsv``.

    Pattern fields become text columns (categorical: one label per file); files are read in sorted order, so the
    result is deterministic. A ``.csv`` whose header is separated by semicolons or tabs is read with that delimiter;
    a file with a header and no data rows, and a JSON-lines line that is not a JSON object, are errors naming the
    file (and the line).
    """
    if isinstance(source, pd.DataFrame):
        return source.copy()
    text = str(source)
    matches = match_pattern(text)
    if not matches:
        path = Path(text)
        if path.is_dir() and any(path.glob("*.parquet")):  # a Parquet dataset (as `vrs analyze --dask` reads it)
            return pd.read_parquet(path)
        if not path.is_file():
            raise InputError(f"No file at {path}. Give a CSV/TSV/Parquet/JSON-lines file, a folder of Parquet files "
                             "or a run-folder pattern such as 'runs/{system}/seed={seed}/scores.tsv'.")
        if sep is not None:
            return _with_rows(pd.read_csv(path, sep=sep), path)
        return _read_table(path)
    fields = list(matches[0][1])
    frames, columns0, first = [], None, None
    for f, _ in matches:
        table = pd.read_csv(f, sep=sep) if sep is not None else _read_table(Path(f))
        if table.empty:
            raise InputError(f"{f} has no rows.")
        clash = [c for c in fields if c in table.columns]
        if clash:
            raise InputError(f"{f} has column(s) {clash} that are also fields of the pattern {text!r}; rename the "
                             "column or the field.")
        if columns0 is None:
            columns0, first = list(table.columns), f
        elif list(table.columns) != columns0:
            only_first = [c for c in columns0 if c not in table.columns]
            only_this = [c for c in table.columns if c not in columns0]
            raise InputError(f"The files disagree on their columns: {first} has {columns0}, {f} has "
                             f"{list(table.columns)} (only in the first: {only_first}; only in the second: "
                             f"{only_this}). Give all runs the same columns.")
        frames.append(table)
    out = pd.concat(frames, ignore_index=True)
    lengths = [len(t) for t in frames]
    for name in fields:   # one label per file, as a categorical column built from the files' row counts
        labels, codes = np.unique([values[name] for _, values in matches], return_inverse=True)
        out[name] = pd.Categorical.from_codes(np.repeat(codes, lengths), categories=[str(v) for v in labels])
    return out[fields + [c for c in out.columns if c not in fields]]


@dataclass
class DataSummary:
    """What :func:`validate` found: the design of the score table."""

    n_rows: int
    n_items: int
    n_systems: int
    systems: list
    replications: dict = field(default_factory=dict)   # column -> levels (over all systems)
    runs_per_system: dict = field(default_factory=dict)
    n_dropped_nan: int = 0
    design: str = ""

    def to_frame(self) -> pd.DataFrame:
        rows = [("rows", self.n_rows), ("items", self.n_items), ("systems", self.n_systems),
                ("dropped rows with a missing score", self.n_dropped_nan)]
        rows += [(f"levels of {k}", v) for k, v in self.replications.items()]
        rows += [(f"runs of {s}", v) for s, v in self.runs_per_system.items()]
        return pd.DataFrame(rows, columns=["", "value"]).set_index("")

    def __repr__(self) -> str:
        return f"DataSummary({self.design})"

    def _repr_html_(self) -> str:
        return f"<p>{html_text(self.design)}</p>" + no_math(self.to_frame().to_html(), "div")


def suggest(name: str, columns) -> str:
    close = difflib.get_close_matches(str(name), [str(c) for c in columns], n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


def computed(x):
    """A dask collection computed (a list of them in one pass); anything else as it is (validation and analysis
    run on pandas and dask DataFrames alike)."""
    if isinstance(x, (list, tuple)):
        if any(hasattr(v, "dask") for v in x):
            import dask

            return list(dask.compute(*x))
        return list(x)
    return x.compute() if hasattr(x, "compute") and hasattr(x, "dask") else x


def _numeric_response(out, response: str, lazy: bool):
    """``out`` with the response column as floats; non-numeric values are an error naming them (and, in memory,
    their rows)."""
    y = out[response]
    if not pd.api.types.is_numeric_dtype(y.dtype):
        conv = pd.to_numeric(y, errors="coerce") if not lazy else y.map_partitions(pd.to_numeric, errors="coerce")
        bad = y.notna() & conv.isna()
        n_bad = int(computed(bad.sum()))
        if n_bad:
            if lazy:
                values = list(computed(y[bad].head(5, npartitions=-1)))
                examples = ", ".join(repr(v) for v in values)
            else:
                idx = list(np.flatnonzero(bad.to_numpy())[:5])
                examples = ", ".join(f"row {i + 1}: {y.iloc[i]!r}" for i in idx)
            raise InputError(f"The response {response!r} must be numeric; {n_bad} value(s) are not ("
                             f"{examples}). Fix or drop those rows.")
        out[response] = conv
    out[response] = out[response].astype(float)
    return out


def _span(counts) -> str:
    lo, hi = int(counts.min()), int(counts.max())
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def _check_values(y, name: str) -> None:
    """A response a model can be fitted to: finite, not constant, and small enough that its squares (every variance,
    every deviance) do not overflow double precision; otherwise an error that says what is wrong with the data.
    ``y`` a pandas or dask Series without missing values."""
    lo, hi, n_inf = (float(v) if i < 2 else int(v) for i, v in enumerate(computed(
        [y.min(), y.max(), (~np.isfinite(y)).sum()])))
    if n_inf:
        raise InputError(f"The response {name!r} has {n_inf} infinite value(s); fix them.")
    if lo == hi:
        raise InputError(f"The response {name!r} is constant (every score is {lo:g}): there is no variation to "
                         "analyse, and no model can be fitted. Check that the right column is the response and that "
                         "the scores were written.")
    big = max(abs(lo), abs(hi))
    if big > 1e150:   # (hi - lo) ** 2 would overflow (a Python float raises OverflowError)
        raise InputError(f"The response {name!r} has values as large as {big:.3g}: their squares overflow double "
                         "precision, so no variance (and no model) can be computed. Rescale the scores (divide "
                         f"them by a power of ten, e.g. {10.0 ** np.floor(np.log10(big)):.0e}).")


def _labels(column: pd.Series) -> pd.Series:
    """A key column (system, item, run, repeat) as text labels in a categorical (categories sorted, codes per row):
    every later grouping, comparison and model fit reads the codes instead of hashing 10^6 strings again. A column
    that is already categorical with text categories keeps its categories (and their order)."""
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype) and all(isinstance(c, str) for c in dtype.categories):
        return column
    return column.astype(str).astype("category")


def validate(df, *, response, system: str | None = None, item: str, replications=(),
             properties=(), dropna: bool = False, repeats=()) -> tuple[pd.DataFrame, DataSummary]:
    """Check the roles of the columns of a score table and return (a clean copy, a :class:`DataSummary`).

    Raises :class:`InputError` for: a missing column (with a did-you-mean), a column in two roles, a non-numeric
    response (naming bad values and, in memory, their rows), missing scores (unless ``dropna``), a missing or single
    property value, a replication column with a single level within every system (run variance not estimable),
    items not shared by all systems, and two rows for the same system, run and item.

    ``df`` may be a pandas or a dask DataFrame (``vrs analyze --dask``): every check is an aggregation (counts per
    system and item, per system, run and item), so the same checks give the same messages on both, and a dask
    DataFrame is returned lazily (validated, not loaded).

    ``response`` may be a list of score columns (several metrics): each is checked; with ``dropna`` a row with a
    missing score in any of them is dropped. ``repeats``: the columns that tell independent draws for the same item
    within a run apart (Inspect epochs; :class:`~vrs_helpers.evaluate.spec.AnalysisSpec` ``repeats``): a (system,
    run, item) may then have several rows, one per repeat. A table without rows, a single item, a constant response
    and a response whose squares overflow are errors that say so (no model can be fitted to them).
    """
    replications = [replications] if isinstance(replications, str) else list(replications or [])
    properties = [properties] if isinstance(properties, str) else list(properties or [])
    repeats = [repeats] if isinstance(repeats, str) else list(repeats or [])
    lazy = hasattr(df, "dask")
    responses = [response] if isinstance(response, str) else list(response)
    if not responses:
        raise InputError("Give at least one response (score) column.")
    roles = [("response", r) for r in responses] + [("system", system), ("item", item)]
    roles += [("replication", r) for r in replications] + [("repeat", r) for r in repeats]
    roles += [("property", p) for p in properties]
    cols = list(df.columns)
    for role, c in roles:
        if c is not None and c not in cols:
            raise InputError(f"The {role} column {c!r} is not in the data.{suggest(c, cols)} Columns: "
                             f"{', '.join(map(str, cols))}.")
    used = [c for _, c in roles if c is not None]
    dup = sorted({c for c in used if used.count(c) > 1})
    if dup:
        raise InputError(f"Column(s) {dup} are given in two roles; each column has one role (response, system, "
                         "item, replication, repeat or property).")
    out = df[used] if lazy else df[used].copy()
    for r in responses:
        out = _numeric_response(out, r, lazy)
    n_rows_in = int(computed(out[responses[0]].size)) if lazy else len(out)
    missing = out[responses].isna()
    per_column = [int(v) for v in computed(missing.sum())]
    for r, n in zip(responses, per_column, strict=True):
        if n and not dropna:
            raise InputError(f"The response {r!r} has {n} missing value(s) (of {n_rows_in} rows). Drop them "
                             "with dropna=True (vrs analyze --dropna) if they are failed runs, or fill them.")
    any_missing = missing.any(axis=1)
    n_nan = int(computed(any_missing.sum()))
    if n_nan:
        out = out[~any_missing]
        if not lazy:
            out = out.reset_index(drop=True)
    if n_rows_in - n_nan == 0:
        raise InputError(f"No data rows{' left after dropping the rows with a missing score' if n_nan else ''}: "
                         "give at least one row per system, run and item.")
    for r in responses:
        _check_values(out[r], r)
    if system is None:
        sys_col = "_system"
        out = out.assign(**{sys_col: "all"})
    else:
        sys_col = system
    for c in [sys_col, item, *replications, *repeats]:
        out[c] = out[c].astype(str) if lazy else _labels(out[c])
    for p in properties:
        missing, distinct = (int(v) for v in computed([out[p].isna().sum(), out[p].nunique()])) if lazy else \
            (int(out[p].isna().sum()), int(out[p].nunique()))
        if missing:
            raise InputError(f"The property {p!r} has {missing} missing value(s); fill or drop them.")
        if distinct < 2:
            first = computed(out[p].head(1, npartitions=-1)).iloc[0] if lazy else out[p].iloc[0]
            raise InputError(f"The property {p!r} has a single value ({first!r}): there is nothing to "
                             "condition on; drop it from the properties.")
    # the design, from counts per (system, runs..., item): every remaining check reads these
    keys = [sys_col, *replications, *repeats, item]
    cells = computed(out.groupby(keys, observed=True)[responses[0]].size())
    cells = cells[cells > 0]
    frame = cells.rename("n").reset_index()
    systems = sorted(frame[sys_col].unique())
    if frame[item].nunique() < 2:
        raise InputError(f"The data hold a single item ({item} = {frame[item].iloc[0]!r}): the variation between "
                         "items, and any comparison that generalizes over them, needs at least 2 items. Check the "
                         f"item column ({item!r}), or add items.")
    for r in replications:  # the one rule on replication columns (compare_systems applies it too)
        problem = replication_problem(r, frame.groupby(sys_col)[r].nunique(), system or sys_col)
        if problem:
            raise InputError(problem)
    if len(systems) > 1:
        # distinct (system, item) pairs counted per system: a system with fewer than all items lacks some (the
        # item sets themselves, a Python set per system, are built only then - for the message)
        pairs = frame[[sys_col, item]].drop_duplicates()
        n_items = pairs[item].nunique()
        per_system = pairs.groupby(sys_col).size()
        short = [s for s in systems if per_system.get(s, 0) < n_items]
        if short:
            union = set(pairs[item])
            lacking = {s: union - set(pairs.loc[pairs[sys_col] == s, item]) for s in short}
            desc = "; ".join(f"{s} lacks {len(v)} (e.g. {', '.join(sorted(v)[:5])})" for s, v in lacking.items())
            raise InputError(f"The systems were not scored on the same items ({len(union)} items in all): {desc}. "
                             "Paired comparisons need every item for every system: restrict the data to the shared "
                             "items.")
    repeated = frame[frame["n"] > 1].sort_values(keys)
    if len(repeated):
        first = {k: repeated.iloc[0][k] for k in keys}
        what = "(system, run, repeat, item)" if repeats else "(system, run, item)"
        raise InputError(f"{int(repeated['n'].sum())} rows repeat a {what} combination, e.g. {first}: "
                         "a replication column is probably missing (e.g. --replication seed), or the rows are "
                         "duplicated.")
    runs_actual = (frame.drop_duplicates([sys_col, *replications]).groupby(sys_col).size() if replications
                   else pd.Series(1, index=systems))
    per_cell = frame.groupby([sys_col, *replications, item])["n"].sum() if repeats else None
    info = DataSummary(
        n_rows=int(frame["n"].sum()), n_items=int(frame[item].nunique()), n_systems=len(systems), systems=systems,
        replications={r: int(frame[r].nunique()) for r in replications},
        runs_per_system={s: int(runs_actual[s]) for s in systems}, n_dropped_nan=n_nan)
    info.design = (f"{info.n_rows:,} rows: {info.n_systems} system(s) ({', '.join(systems[:6])}"
                   f"{', ...' if len(systems) > 6 else ''}) x {info.n_items:,} items"
                   + (f", runs per system {sorted(set(info.runs_per_system.values()))} over "
                      f"{', '.join(replications)}" if replications else ", one run per system")
                   + (f", repeats per item {_span(per_cell)} over {', '.join(repeats)}" if repeats else "")
                   + (f"; {n_nan} rows with a missing score dropped" if n_nan else "")
                   + (f"; read as {DELIMITERS[sep]}-separated (the file's header uses {DELIMITERS[sep]}s)"
                      if (sep := getattr(df, "attrs", {}).get("delimiter")) in DELIMITERS else ""))
    if system is None:
        out = out.drop(columns=[sys_col])
    return out, info

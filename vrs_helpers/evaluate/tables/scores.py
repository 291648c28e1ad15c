"""Reading and checking your own evaluation results for workbook 07 and ``vrs analyze``.

A score table has one row per system, run and test item. It comes as a file (CSV, TSV, Parquet, JSON lines) or as a
folder of runs the way experiment logs look, given as a pattern with named fields::

    runs/{system}/seed={seed}/scores.tsv

Every file matching the pattern is read (a table with a header, or a plain file with one score per line, the
item being the line number) and the named fields become columns. :func:`validate` then checks the roles of the
columns and says what to do about anything that would make a wrong number.
"""

from __future__ import annotations

import contextlib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...book.glrt import replication_problem
from ...literal import html_text, no_math
from ..files import base_suffix, check_text_file, not_utf8, read_text
from ..precheck import (
    TABLE_SUFFIXES,
    InputError,
    check_roles,
    check_system_count,
    iter_json_lines,
    match_pattern,
    no_file,
)


def natural_key(text: str) -> list:
    """Sort key of an id in natural order: ``3 < 4 < 10``, ``item2 < item10`` (digits compared as numbers)."""
    import re

    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", str(text)) if part]

def _read_table(path: Path) -> pd.DataFrame:
    kind = TABLE_SUFFIXES.get(base_suffix(path))
    with _reading(path):
        if kind == "parquet":
            return _with_rows(pd.read_parquet(path), path)
        check_text_file(path)
        if kind == "jsonl":
            return _with_rows(pd.DataFrame([rec for _, rec in iter_json_lines(path)]), path)
        if kind is not None:
            return read_delimited(path, kind)
    return _read_plain(path)


@contextlib.contextmanager
def _reading(path):
    """What goes wrong while a table file is read, as the user's error: not UTF-8 (where, and what to do), or
    unreadable (pandas' or the system's reason)."""
    import lzma
    import zipfile
    import zlib

    try:
        yield
    except UnicodeDecodeError:
        raise InputError(not_utf8(path)) from None
    except (ValueError, OSError, EOFError, pd.errors.ParserError, lzma.LZMAError, zlib.error,
            zipfile.BadZipFile, RecursionError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"Could not read {path}: {type(exc).__name__}: {exc}") from exc


def _read_csv(path, sep: str) -> pd.DataFrame:
    """A delimited file with the delimiter the user gave; a file that is not UTF-8 text is an error saying where."""
    check_text_file(path)
    with _reading(path):
        return _with_rows(pd.read_csv(path, sep=sep), path)


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


def _read_plain(path: Path) -> pd.DataFrame:
    """One score per line (empty lines skipped); the item is the 1-based line number."""
    lines = read_text(path).splitlines()
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


def load_scores(source, *, sep: str | None = None) -> pd.DataFrame:
    """A score table from a DataFrame, a file (CSV, TSV, Parquet, JSON lines, plain scores; compressed: ``.gz``,
    ``.bz2``, ``.xz``, a ``.zip`` of one file), a folder of Parquet files, or a run-folder pattern with named
    fields, e.g. ``runs/{system}/seed={seed}/scores.tsv`` (run folders that are links to folders are followed).
    Text that is not UTF-8 is an error naming the line and byte (and "save it as UTF-8"); a spreadsheet (``.xlsx``,
    ``.xls``, ``.ods``, or one renamed ``.csv``) one saying to save it as CSV (UTF-8).

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
            raise InputError(no_file(path))
        if sep is not None:
            return _read_csv(path, sep)
        return _read_table(path)
    fields = list(matches[0][1])
    frames, columns0, first = [], None, None
    for f, _ in matches:
        table = _read_csv(f, sep) if sep is not None else _read_table(Path(f))
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
    out = out[fields + [c for c in out.columns if c not in fields]]
    out.attrs["files"] = FileRows((str(f), n) for (f, _), n in zip(matches, lengths, strict=True))
    return out


class FileRows(tuple):
    """(file, rows) of the files a run-folder pattern read, in order, so that messages name a row's file; kept in
    ``DataFrame.attrs``, which pandas deep-copies on every operation: this one is shared, not copied."""

    def __deepcopy__(self, memo):
        return self


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
    n_dropped_keys: int = 0   # rows without a system, item, run, repeat or property label (dropna)

    def to_frame(self) -> pd.DataFrame:
        rows = [("rows", self.n_rows), ("items", self.n_items), ("systems", self.n_systems),
                ("dropped rows with a missing score", self.n_dropped_nan)]
        rows += [("dropped rows with a missing key", self.n_dropped_keys)] if self.n_dropped_keys else []
        rows += [(f"levels of {k}", v) for k, v in self.replications.items()]
        rows += [(f"runs of {s}", v) for s, v in self.runs_per_system.items()]
        return pd.DataFrame(rows, columns=["", "value"]).set_index("")

    def __repr__(self) -> str:
        return f"DataSummary({self.design})"

    def _repr_html_(self) -> str:
        return f"<p>{html_text(self.design)}</p>" + no_math(self.to_frame().to_html(), "div")


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
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories.inferred_type in ("string", "empty"):
        return column
    return column.astype(str).astype("category")


def _rows(mask: np.ndarray, files=None, shown: int = 5) -> str:
    """The first rows where ``mask`` holds, as 1-based data row numbers (a file's rows below its header); for a
    table read from a run-folder pattern (``files``: [(file, rows)] in order), each with its file."""
    rows = np.flatnonzero(mask)[:shown]
    n = int(mask.sum())
    more = ", ..." if n > shown else ""
    if not files:
        return f"data row{'s' if n > 1 else ''} {', '.join(str(r + 1) for r in rows)}{more}"
    starts = np.cumsum([0] + [k for _, k in files])
    where = [(files[i][0], r - starts[i] + 1) for r in rows for i in [int(np.searchsorted(starts, r, "right")) - 1]]
    return "; ".join(f"{f} data row {k}" for f, k in where) + more


def _drop_missing_keys(out, keys, label_cols, dropna: bool, lazy: bool, files=None):
    """The key columns (system, item, replications, repeats, properties) checked for missing labels - empty cells,
    and text labels that are blank - before anything else reads them: an error naming each column, its count and
    first rows, or (``dropna``) those rows dropped. The label columns become text labels (:func:`_labels`).
    Returns (table, number of rows dropped)."""
    cols = [c for _, c in keys]
    if lazy:
        counts = [int(v) for v in computed([out[c].isna().sum() for c in cols])]
        n_drop = 0
        if any(counts) and dropna:
            n_drop = int(computed(out[cols].isna().any(axis=1).sum()))
            out = out.dropna(subset=cols)
        for c in label_cols:
            out[c] = out[c].astype(str)
        masks = dict.fromkeys(cols)
        if any(counts) and not dropna:   # the error names the first rows, as in memory: one more pass, only then
            found = computed([out[c].isna() for c, n in zip(cols, counts, strict=True) if n])
            masks.update({c: m.to_numpy() for c, m in zip([c for c, n in zip(cols, counts, strict=True) if n],
                                                          found, strict=True)})
    else:
        masks = {c: out[c].isna().to_numpy() for c in cols}
        for c in label_cols:
            out[c] = _labels(out[c])
            blank = np.flatnonzero(out[c].cat.categories.astype(str).str.strip() == "")   # vectorized: 10^6 items
            if c in masks and len(blank):
                masks[c] = masks[c] | np.isin(out[c].cat.codes.to_numpy(), blank)
        counts = [int(masks[c].sum()) for c in cols]
        n_drop = 0
        if any(counts) and dropna:
            keep = ~np.logical_or.reduce([masks[c] for c in cols])
            n_drop = int((~keep).sum())
            out = out[keep].reset_index(drop=True)
            for c in label_cols:
                out[c] = out[c].cat.remove_unused_categories()
    if any(counts) and not dropna:
        desc = "; ".join(f"the {role} column {c!r} in {n} row{'s' if n > 1 else ''}"
                         + (f" ({_rows(masks[c], files)})" if masks[c] is not None else "")
                         for (role, c), n in zip(keys, counts, strict=True) if n)
        raise InputError(f"Empty key cells: {desc}. Every row needs a label in each key column "
                         f"({', '.join(cols)}) to be placed in the design. Fill them in, or drop those rows with "
                         "dropna=True (vrs analyze --dropna).")
    return out, n_drop


def _label_key(label) -> str:
    text = unicodedata.normalize("NFKC", str(label))
    return " ".join(unicodedata.normalize("NFKC", text.casefold()).split())


def near_duplicates(labels, *, case: bool = True) -> list[list[str]]:
    """Groups of distinct labels that name the same thing but for case, spacing (surrounding, or runs of blanks
    inside) or Unicode form (NFKC: full-width letters, ligatures): ``['A', 'a ']``. ``case=False``: only labels that
    differ in their surrounding spaces. Sorted groups of two or more, in order of their first label."""
    groups: dict = {}
    for label in dict.fromkeys(map(str, labels)):
        groups.setdefault(_label_key(label) if case else label.strip(), []).append(label)
    return sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def check_near_duplicates(table, keys) -> None:
    """Labels of a key column that differ only in case, spacing or Unicode form (``A`` and ``a ``) would be
    different systems (runs, repeats) to every model: an error naming them. Items are checked for surrounding
    spaces only (items such as words may differ in case). Reads the unique labels only (the categories of a
    validated table)."""
    for role, c in keys:
        values = table[c].cat.categories if isinstance(table[c].dtype, pd.CategoricalDtype) else table[c].unique()
        values = pd.Index(values).astype(str)
        if role == "item":
            if not (values.str.strip() != values).any():   # cheap on 10^6 items: most have no surrounding spaces
                continue
            found = near_duplicates(values, case=False)
        else:
            found = near_duplicates(values)
        if found:
            shown = "; ".join(" and ".join(repr(v) for v in g) for g in found[:5])
            what = {"system": "systems", "replication": "runs", "repeat": "repeats", "item": "items"}[role]
            raise InputError(f"The {role} column {c!r} has labels that differ only in case, spaces or Unicode form: "
                             f"{shown}{'; ...' if len(found) > 5 else ''} ({len(found)} group(s)). They would be "
                             f"analysed as different {what}. If they are the same, write them the same way in the "
                             "data (e.g. trim the spaces); if not, give them names that differ in more than that.")


def validate(df, *, response, system: str | None = None, item: str, replications=(),
             properties=(), dropna: bool = False, repeats=(), human=None) -> tuple[pd.DataFrame, DataSummary]:
    """Check the roles of the columns of a score table and return (a clean copy, a :class:`DataSummary`).

    Raises :class:`InputError` for: a missing column (with a did-you-mean), a column in two roles, an empty or blank
    key cell - system, item, replication, repeat, property - (naming the column and, in memory, its first 1-based
    data rows; ``dropna`` drops those rows instead, counted in ``n_dropped_keys``), labels of the system,
    replication or repeat column that differ only in case, spacing or Unicode form (``A`` and ``a ``; items: only in
    surrounding spaces; :func:`near_duplicates`, on the unique labels), a non-numeric response (naming bad values
    and, in memory, their rows), missing scores (unless ``dropna``), a single property value, a replication column
    with a single level within every system (run variance not estimable), items not shared by all systems, and two
    rows for the same system, run and item.

    ``df`` may be a pandas or a dask DataFrame (``vrs analyze --dask``): every check is an aggregation (counts per
    system and item, per system, run and item), so the same checks give the same messages on both, and a dask
    DataFrame is returned lazily (validated, not loaded).

    ``response`` may be a list of score columns (several metrics): each is checked; with ``dropna`` a row with a
    missing score in any of them is dropped. ``repeats``: the columns that tell independent draws for the same item
    within a run apart (Inspect epochs; :class:`~vrs_helpers.evaluate.tables.spec.AnalysisSpec` ``repeats``): a (system,
    run, item) may then have several rows, one per repeat. A table without rows, a single item, a constant response
    and a response whose squares overflow are errors that say so (no model can be fitted to them).

    ``human``: a column of human labels, missing on the rows no human labelled, carried into the clean table
    unchecked (:func:`vrs_helpers.evaluate.tables.judged.check_labels` checks it; issue 43).
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
    roles += [("property", p) for p in properties] + [("human label", human)]
    check_roles(roles, list(df.columns))
    used = [c for _, c in roles if c is not None]
    out = df[used] if lazy else df[used].copy()
    if not lazy:
        out.attrs.pop("files", None)   # named in the messages below; the clean table does not carry it
    if system is None:
        sys_col = "_system"
        out = out.assign(**{sys_col: "all"})
    else:
        sys_col = system
    n_rows_given = int(computed(out[used[0]].size)) if lazy else len(out)
    key_roles = [("system", system)] * (system is not None) + [("item", item)]
    key_roles += [("replication", r) for r in replications] + [("repeat", r) for r in repeats]
    out, n_keyless = _drop_missing_keys(out, key_roles + [("property", p) for p in properties],
                                        [sys_col, item, *replications, *repeats], dropna, lazy,
                                        getattr(df, "attrs", {}).get("files"))
    if not lazy:   # labels that differ only in case or spaces, on the categories (one per label, not per row)
        check_near_duplicates(out, key_roles)
    for r in responses:
        out = _numeric_response(out, r, lazy)
    n_rows_in = n_rows_given - n_keyless
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
        what = " left after dropping the rows with a missing " + ("score or key" if n_keyless else "score")
        raise InputError(f"No data rows{what if n_nan or n_keyless else ''}: give at least one row per system, run "
                         "and item.")
    for r in responses:
        _check_values(out[r], r)
    for p in properties:
        distinct = int(computed(out[p].nunique()))
        if distinct < 2:
            first = computed(out[p].head(1, npartitions=-1)).iloc[0] if lazy else out[p].iloc[0]
            raise InputError(f"The property {p!r} has a single value ({first!r}): there is nothing to "
                             "condition on; drop it from the properties.")
    # the design, from counts per (system, runs..., item): every remaining check reads these
    keys = [sys_col, *replications, *repeats, item]
    cells = computed(out.groupby(keys, observed=True)[responses[0]].size())
    cells = cells[cells > 0]
    frame = cells.rename("n").reset_index()
    if lazy:   # the labels of a dask table: those of its cells (computed above)
        check_near_duplicates(frame, key_roles)
    systems = sorted(frame[sys_col].unique())
    check_system_count(len(systems), int(frame["n"].sum()), system)   # before any model or pair is built
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
            desc = "; ".join(f"{s} lacks {len(v)} (e.g. {', '.join(sorted(map(str, v), key=natural_key)[:5])})"
                             for s, v in lacking.items())
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
        runs_per_system={s: int(runs_actual[s]) for s in systems}, n_dropped_nan=n_nan, n_dropped_keys=n_keyless)
    info.design = (f"{info.n_rows:,} rows: {info.n_systems} system(s) ({', '.join(systems[:6])}"
                   f"{', ...' if len(systems) > 6 else ''}) x {info.n_items:,} items"
                   + (f", runs per system {sorted(set(info.runs_per_system.values()))} over "
                      f"{', '.join(replications)}" if replications else ", one run per system")
                   + (f", repeats per item {_span(per_cell)} over {', '.join(repeats)}" if repeats else "")
                   + (f"; {n_keyless} rows with a missing key dropped" if n_keyless else "")
                   + (f"; {n_nan} rows with a missing score dropped" if n_nan else "")
                   + (f"; read as {DELIMITERS[sep]}-separated (the file's header uses {DELIMITERS[sep]}s)"
                      if (sep := getattr(df, "attrs", {}).get("delimiter")) in DELIMITERS else ""))
    if system is None:
        out = out.drop(columns=[sys_col])
    return out, info

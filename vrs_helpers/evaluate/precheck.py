"""The checks of ``vrs analyze``'s input that need neither pandas nor the models: they run before the report's
kernel starts and before the analysis modules are imported (together some seconds), so that a typo is answered at
once (issue 42).

- :func:`check_table_input` - the data path exists (a file, a folder, or a run-folder pattern that matches), the
  file can be read, and every column named on the command line is in its header (CSV/TSV by their first line,
  JSON lines by their records' keys, Parquet by its schema), each in one role;
- :func:`check_roles` - the column roles against a table's columns (also :func:`~.scores.validate`'s check);
- :func:`match_pattern` - the files a run-folder pattern with named fields matches;
- :func:`iter_json_lines` - the records of a JSON-lines file, a bad line an error naming it;
- :func:`names`, :func:`count`, :func:`fraction` - option values (:class:`~.spec.AnalysisSpec` checks its own with
  them);
- :func:`check_system_count` - a number of systems the analysis cannot be meant for (an id column as the system, or
  more than :func:`max_systems`), checked by :func:`~.scores.validate` before any model (issue 50);
- :class:`InputError` - the error of bad input (exit 2), raised here and by :mod:`.scores`.

Only what is certainly wrong is reported here; whatever this module cannot judge (a zipped file, a header with
duplicate or empty names, a folder of Parquet files) is left to :func:`~.scores.load_scores` and
:func:`~.scores.validate`, which read the whole table.
"""

from __future__ import annotations

import difflib
import glob
import math
import os
import re
from pathlib import Path

from .files import (
    RAISE_IT,
    InputError,
    base_suffix,
    check_inflation,
    check_not_spreadsheet,
    compression,
    format_size,
    max_input_bytes,
    not_utf8,
    open_text,
)

TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".jsonl": "jsonl", ".ndjson": "jsonl",
                  ".parquet": "parquet", ".pq": "parquet"}
PLAIN_SUFFIXES = {".txt", ".score", ".scores", ""}
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

table_suffix = base_suffix   # the suffix that tells a table's kind (``.csv`` for ``scores.csv.gz``), lower case


def iter_json_lines(path, error: type = None, whole: bool = True):
    """(line number, record) for every non-empty line of a JSON-lines file (compressed or not, :func:`~.files.
    open_text`); a line that is not a JSON object is an error (``error``, default :class:`InputError`) naming the
    file and the line, and so are a line longer than 1/16 of the input bound (:func:`~.files.max_input_bytes`), a
    line nested deeper than the JSON parser goes, and a damaged compressed file. ``whole``: the records are kept (a
    table, a log), so a compressed file is first checked to inflate within the bound (:func:`~.files.
    check_inflation`); a reader that looks at a few records only passes False."""
    import json

    error = error or InputError
    path = Path(path)
    longest = max(max_input_bytes() // 16, 1 << 16)
    try:
        if whole:
            check_inflation(path)
        handle = open_text(path)
    except (OSError, InputError) as exc:
        raise error(str(exc) if isinstance(exc, InputError) else f"Could not read {path}: {exc}") from exc
    with handle:
        try:
            for number, line in enumerate(iter(lambda: handle.readline(longest + 1), ""), start=1):
                if len(line) > longest and not line.endswith("\n"):
                    raise error(f"{path}, line {number}: longer than {format_size(longest)} (1/16 of the bound on "
                                f"an input file): not a JSON-lines record. If it is one, {RAISE_IT}.")
                text = line.strip()
                if not text:
                    continue
                try:
                    record = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise error(f"{path}, line {number}: not valid JSON ({exc.msg} at column {exc.colno}: "
                                f"{text[:60]!r}). A JSON-lines file has one JSON object per line.") from None
                except RecursionError:
                    raise error(f"{path}, line {number}: JSON nested deeper than the parser follows (about 1,000 "
                                "levels): not a record of scores. Check the file (a damaged or hostile log?).") \
                        from None
                if not isinstance(record, dict):
                    raise error(f"{path}, line {number}: a JSON {type(record).__name__}, not an object "
                                "({...}). A JSON-lines file has one JSON object per line.")
                yield number, record
        except UnicodeDecodeError:
            raise error(not_utf8(path)) from None
        except InputError as exc:   # a damaged or inflating compressed file (files.open_binary)
            if isinstance(exc, error):
                raise
            raise error(str(exc)) from None
        except (OSError, EOFError) as exc:   # a damaged compressed file
            raise error(f"Could not read {path}: {exc}") from None


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


def suggest(name: str, columns) -> str:
    close = difflib.get_close_matches(str(name), [str(c) for c in columns], n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


def no_file(path) -> str:
    """The message for a data path where nothing is."""
    return (f"No file at {path}. Give a CSV/TSV/Parquet/JSON-lines file, a folder of Parquet files or a run-folder "
            "pattern such as 'runs/{system}/seed={seed}/scores.tsv'.")


def check_roles(roles, columns) -> None:
    """Every named column of ``roles`` ((role, column or None) pairs) is one of ``columns`` (else an error with a
    did-you-mean), and no column has two roles."""
    cols = list(columns)
    for role, c in roles:
        if c is not None and c not in cols:
            raise InputError(f"The {role} column {c!r} is not in the data.{suggest(c, cols)} Columns: "
                             f"{', '.join(map(str, cols))}.")
    used = [c for _, c in roles if c is not None]
    dup = sorted({c for c in used if used.count(c) > 1})
    if dup:
        raise InputError(f"Column(s) {dup} are given in two roles; each column has one role (response, system, "
                         "item, replication, repeat or property).")


def names(value, what: str) -> tuple:
    """A column name or a list of them as a tuple of names (None or "" -> ())."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    items = (value,) if isinstance(value, str) else tuple(value)
    bad = [v for v in items if not isinstance(v, str) or not v]
    if bad:
        raise InputError(f"{what} must be column names; got {bad!r}.")
    return items


def count(name: str, value) -> int:
    """``value`` as a positive integer (else an error naming ``name``)."""
    try:
        ok = not isinstance(value, bool) and float(value).is_integer() and int(value) >= 1
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise InputError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def fraction(name: str, value) -> float:
    """``value`` as a number strictly between 0 and 1 (else an error naming ``name``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not 0 < v < 1:
        raise InputError(f"{name} must be between 0 and 1, got {value!r}.")
    return v


def _open_text(path: Path):
    """``path`` opened as text, decompressed (:func:`~.files.open_text`; a zip archive of several files is judged
    by the full read)."""
    try:
        return open_text(path)
    except InputError:
        return None


def _delimited_header(path: Path, sep: str):
    """The column names of a delimited file's header line as pandas reads them (the delimiter checked as
    :func:`~.scores.read_delimited` does), or None when they cannot be judged here."""
    import csv

    handle = _open_text(path)
    if handle is None:
        return None
    with handle:
        line = handle.readline(1 << 20)
    try:
        fields = next(csv.reader([line], delimiter=sep), [])
    except csv.Error:   # a NUL byte, a field beyond csv's limit: the full read says what is wrong
        return None
    if len(fields) == 1:
        found = [d for d in (",", "\t", ";", "|") if d != sep and d in fields[0]]
        if len(found) > 1:
            return None   # read_delimited names the delimiters
        if found:
            try:
                fields = next(csv.reader([line], delimiter=found[0]), [])
            except csv.Error:
                return None
    fields = [f.rstrip("\r\n") for f in fields]
    if not fields or any(not f for f in fields) or len(set(fields)) != len(fields):
        return None   # pandas renames empty and repeated names
    return fields


def _jsonl_columns(path: Path, wanted) -> list | None:
    """The keys of a JSON-lines file's records: those of the first record when it has every ``wanted`` column,
    else of all records (pandas takes their union)."""
    keys: dict = {}
    for i, (_, record) in enumerate(iter_json_lines(path, whole=False)):
        keys.update(dict.fromkeys(record))
        if i == 0 and all(c in keys for c in wanted):
            break
    return list(keys) if keys else None


def _file_columns(path: Path, wanted) -> list | None:
    """The columns of the score table in the file ``path`` (None: not judged here)."""
    kind = TABLE_SUFFIXES.get(table_suffix(path))
    try:
        if kind != "parquet":
            check_not_spreadsheet(path)   # "save it as CSV (UTF-8)", as the full read says
        if kind == "parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        if kind == "jsonl":
            return _jsonl_columns(path, wanted)
        if kind is not None:
            return _delimited_header(path, kind)
    except InputError:
        raise
    except UnicodeDecodeError:
        raise InputError(not_utf8(path)) from None
    except (ValueError, OSError) as exc:   # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"Could not read {path}: {exc}") from exc
    if table_suffix(path) in PLAIN_SUFFIXES:
        return ["item", "score"]   # one score per line (scores._read_plain)
    return None


def check_table_input(data, roles) -> None:
    """Before anything heavy: the score table at ``data`` (a path or a run-folder pattern) exists, can be read and
    has every column of ``roles`` ((role, column or None) pairs), each in one role. Raises :class:`InputError`
    with the message the full read (:func:`~.scores.load_scores`, :func:`~.scores.validate`) would give; what
    cannot be judged from a header passes and is checked there."""
    text = str(data)
    matches = match_pattern(text)
    if matches:
        first, fields = Path(matches[0][0]), list(matches[0][1])
    else:
        first, fields = Path(text), []
        if first.is_dir():
            return   # a folder of Parquet parts (or of logs): read as a whole
        if not first.is_file():
            raise InputError(no_file(first))
    if not first.is_file():
        return
    wanted = [c for _, c in roles if c is not None]
    columns = _file_columns(first, wanted)
    if columns is not None:
        try:
            check_roles(roles, fields + [c for c in columns if c not in fields])
        except InputError:
            if compression(first):   # the header of a damaged archive is garbage: say that it is damaged
                check_inflation(first)
            raise


#: the most systems one analysis compares (every pair: k (k - 1) / 2 of them, with k x k and pairs x k matrices);
#: ``VRS_MAX_SYSTEMS`` (``vrs analyze --max-systems``) raises it
MAX_SYSTEMS = 500
ENV_MAX_SYSTEMS = "VRS_MAX_SYSTEMS"
#: from this many systems on, fewer than :data:`MIN_ROWS_PER_SYSTEM` rows per system is taken for a wrong column
PLAUSIBLE_SYSTEMS, MIN_ROWS_PER_SYSTEM = 20, 3


def max_systems() -> int:
    """The most systems an analysis takes: ``VRS_MAX_SYSTEMS`` or :data:`MAX_SYSTEMS`."""
    text = os.environ.get(ENV_MAX_SYSTEMS, "").strip()
    if not text:
        return MAX_SYSTEMS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise InputError(f"{ENV_MAX_SYSTEMS} (--max-systems) must be a whole number of at least 2, got {text!r}.")
    return value


def check_system_count(n_systems: int, n_rows: int, column: str | None) -> None:
    """Issue 50: before any model is fitted, a number of systems the analysis cannot be meant for is an error that
    says so - an id column of the rows or items given as the system (50,000 "systems" of 2 rows each would build
    matrices of k x k and every pair's contrast: gigabytes, and hours), or more systems than
    :func:`max_systems`."""
    what = f"The system column {column!r}" if column else "The data"
    if n_systems >= PLAUSIBLE_SYSTEMS and n_rows < MIN_ROWS_PER_SYSTEM * n_systems:
        raise InputError(f"{what} has {n_systems:,} different labels for {n_rows:,} rows ({n_rows / n_systems:.1f} "
                         "rows per system): is --system the right column? A system is a model or configuration "
                         "whose scores are compared, scored on every item (and run); an id of the rows or items is "
                         "not one. Name the column of the systems with --system (e.g. --system model).")
    limit = max_systems()
    if n_systems > limit:
        pairs = n_systems * (n_systems - 1) // 2
        raise InputError(f"{what} has {n_systems:,} systems: the analysis compares every pair of them ({pairs:,} "
                         f"pairs), which needs more memory and time than it is made for beyond {limit:,} systems. "
                         "Analyse a subset (a family of models, the top of a leaderboard), or raise the bound with "
                         f"--max-systems N (or {ENV_MAX_SYSTEMS}=N) if the machine has the memory.")

"""Data shown literally: names and values from a user's data (systems, items, tasks, metrics, columns, properties,
runs, labels, file names, and messages quoting them) put into HTML, Markdown or a matplotlib figure, so that they
are shown as the characters they are and never become markup, math or script (issue 37).

- :func:`html_text` - for HTML: escaped (``<``, ``>``, ``&``, quotes) and kept from MathJax;
- :func:`markdown_text` - for Markdown (``IPython.display.Markdown``, rendered by nbconvert's mistune and then by
  MathJax): every ASCII punctuation character and line break as a numeric character reference, kept from MathJax;
- :func:`plot_text` - for a matplotlib text (tick label, legend entry, title, annotation): every ``$`` escaped, so
  that mathtext never parses it, and a leading ``_`` kept visible in a legend;
- :func:`console_text` - for a terminal (issue 50): every control character (C0, DEL, C1 - escape sequences that
  move the cursor, erase lines or set the window title, and line breaks that would split a line) and every Unicode
  bidirectional override written as its ``repr``-style escape (``\\x1b``, ``\\n``, ``\\u202e``);
- :func:`spreadsheet_cell` / :func:`spreadsheet_frame` - for a CSV file that a spreadsheet opens (issue 50): a text
  cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (a formula to Excel, LibreOffice and
  Google Sheets) prefixed with ``'`` (OWASP's rule for CSV injection); numbers, and text that is a plain number
  such as ``-0.07``, stay as they are.

MathJax (2.7, the report's ``tex2jax`` with ``processEscapes``) typesets ``$...$``, ``$$...$$``, ``\\(...\\)``,
``\\[...\\]``, ``\\begin{...}`` and ``\\ref{...}`` in any text of the page that is outside ``pre``/``code``; HTML
escaping does not stop it (it reads the text, after the entities are decoded). Text inside an element of class
:data:`NO_MATH_CLASS` is not scanned, and a math delimiter outside such an element cannot reach into it (the scan
stops at every element boundary), so a name wrapped in it is shown as it is.
"""

from __future__ import annotations

import html
import re
import string

NO_MATH_CLASS = "tex2jax_ignore"  # MathJax 2's default ``ignoreClass``: no math is looked for inside

# ASCII punctuation and line breaks as numeric character references: CommonMark never reads one as syntax (a
# backslash escape would do as well in CommonMark, but mistune 3 drops the escape of "&" after an emphasis), a math
# extension finds no "$" in them, and a line break cannot end the paragraph, list item or heading the text is in
_MARKDOWN_ESCAPES = {c: f"&#{ord(c)};" for c in string.punctuation + "\r\n"}


def no_math(fragment: str, tag: str = "span") -> str:
    """An HTML ``fragment`` (already escaped) in a ``<span>`` (or ``tag``) that MathJax leaves alone."""
    return f'<{tag} class="{NO_MATH_CLASS}">{fragment}</{tag}>'


def html_text(value) -> str:
    """``str(value)`` as HTML text: escaped and in a span MathJax leaves alone. For element content; an attribute
    value takes ``html.escape(str(value))`` (with the attribute quoted)."""
    return no_math(html.escape(str(value)))


def markdown_text(value) -> str:
    """``str(value)`` as Markdown that renders to exactly its characters: ASCII punctuation, carriage returns and
    line feeds as numeric character references (no emphasis, code, link, heading, list, table cell, HTML tag or math
    starts inside it, and it stays in its paragraph), all in a span MathJax leaves alone."""
    return no_math("".join(_MARKDOWN_ESCAPES.get(c, c) for c in str(value)))


def plot_text(value) -> str:
    """``str(value)`` for a matplotlib text drawn as its characters: each ``$`` escaped as ``\\$``, so no mathtext
    is parsed (matplotlib treats a text as math only when it has unescaped ``$``; it then shows ``\\$`` as ``$``),
    and a leading ``_`` preceded by a zero-width space (a legend leaves out every entry whose label starts with
    ``_``). Assumes ``text.usetex`` is off (matplotlib's default; the workbooks never turn it on)."""
    text = str(value).replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


# C0 controls, DEL, C1 controls, and the Unicode bidirectional embeddings, overrides and isolates (they reorder what
# a terminal shows: "Trojan source")
_CONSOLE_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def console_text(value) -> str:
    """``str(value)`` for one line of a terminal: every control character written as its ``repr``-style escape
    (``"A\\x1b[1A"`` for ``"A\x1b[1A"``, ``"a\\nb"`` for a line feed inside a name), so that a name from the data
    can neither move the cursor, erase a line, set the window title nor split the line it is printed in; other
    characters as they are. Used by everything ``vrs`` prints (:mod:`vrs_helpers.app.console`)."""
    text = str(value)
    if not _CONSOLE_CONTROLS.search(text):
        return text
    return _CONSOLE_CONTROLS.sub(lambda m: repr(m.group())[1:-1], text)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")   # what a spreadsheet reads as a number


def spreadsheet_cell(value):
    """A cell value for a CSV a spreadsheet may open: text that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
    carriage return gets a leading ``'`` (a spreadsheet then shows it as text, never as a formula: OWASP's rule
    against CSV injection), unless it is a plain number (``-0.07``, ``+1e-5``: a number to the spreadsheet too).
    Anything that is not text (numbers, booleans, missing values) is returned as it is."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def spreadsheet_value(value):
    """The value a :func:`spreadsheet_cell` was made of, for reading back a CSV the package wrote itself (the
    scorecard baseline, the run times): a leading ``'`` before a formula's first character dropped."""
    if isinstance(value, str) and len(value) > 1 and value[0] == "'" and value[1:].startswith(_FORMULA_START):
        return value[1:]
    return value


def spreadsheet_frame(frame):
    """A copy of a pandas DataFrame whose text cells and column names are :func:`spreadsheet_cell` s (numeric
    columns untouched: a negative number stays a number); write it with ``to_csv``."""
    from pandas.api import types

    out = frame.copy()
    for i in range(out.shape[1]):
        column = out.iloc[:, i]
        if not (types.is_numeric_dtype(column.dtype) or types.is_datetime64_any_dtype(column.dtype)):
            out.isetitem(i, column.astype(object).map(spreadsheet_cell))
    out.columns = [spreadsheet_cell(c) for c in out.columns]
    return out


def to_csv(frame, path, **options) -> None:
    """Write ``frame`` as a CSV file that a spreadsheet can open safely (:func:`spreadsheet_frame`): every CSV ``vrs``
    writes goes through here. ``options``: those of ``DataFrame.to_csv`` (default ``index=False``)."""
    options.setdefault("index", False)
    spreadsheet_frame(frame).to_csv(path, **options)


def read_back(frame):
    """A CSV the package wrote (:func:`to_csv`), read with pandas, with its text cells and column names as they
    were (:func:`spreadsheet_value`)."""
    from pandas.api import types

    out = frame.copy()
    for i in range(out.shape[1]):
        column = out.iloc[:, i]
        if not types.is_numeric_dtype(column.dtype):
            out.isetitem(i, column.astype(object).map(spreadsheet_value))
    out.columns = [spreadsheet_value(c) for c in out.columns]
    return out

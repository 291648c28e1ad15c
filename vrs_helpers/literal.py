"""Data shown literally: names and values from a user's data (systems, items, tasks, metrics, columns, properties,
runs, labels, file names, and messages quoting them) put into HTML, Markdown or a matplotlib figure, so that they
are shown as the characters they are and never become markup, math or script (issue 37).

- :func:`html_text` - for HTML: escaped (``<``, ``>``, ``&``, quotes) and kept from MathJax;
- :func:`markdown_text` - for Markdown (``IPython.display.Markdown``, rendered by nbconvert's mistune and then by
  MathJax): every ASCII punctuation character and line break as a numeric character reference, kept from MathJax;
- :func:`plot_text` - for a matplotlib text (tick label, legend entry, title, annotation): every ``$`` escaped, so
  that mathtext never parses it, and a leading ``_`` kept visible in a legend.

MathJax (2.7, the report's ``tex2jax`` with ``processEscapes``) typesets ``$...$``, ``$$...$$``, ``\\(...\\)``,
``\\[...\\]``, ``\\begin{...}`` and ``\\ref{...}`` in any text of the page that is outside ``pre``/``code``; HTML
escaping does not stop it (it reads the text, after the entities are decoded). Text inside an element of class
:data:`NO_MATH_CLASS` is not scanned, and a math delimiter outside such an element cannot reach into it (the scan
stops at every element boundary), so a name wrapped in it is shown as it is.
"""

from __future__ import annotations

import html
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

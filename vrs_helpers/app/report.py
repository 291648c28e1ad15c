"""The reproduction report site that ``vrs reproduce`` writes into ``build/html/``.

- ``index.html``: one card per workbook (title, book sections, a thumbnail of its key figure, the counts of true /
  explained / false book rows and, apart, of its reference rows, run time, links to its pages), the scorecard
  grouped by workbook and book table with values at the book's printed precision, the alternative reference and
  the explanation, each row linking to the check in the notebook page, and the coverage table of the book. The
  headline counts book rows only (numbers printed in the book or a paper); reference rows (ours against lme4, mgcv,
  emmeans on the same data) are counted and shown apart (:mod:`vrs_helpers.app.scorecard`);
- one page per executed notebook, exported with a template that loads nothing from the internet: MathJax is served
  from ``mathjax/`` (copied from the ``jupyter-server-mathjax`` package, MathJax 2.7), require.js, mermaid and the
  widget manager (which the workbooks do not use) are left out; a header links back to the report and the API;
  cells tagged ``check`` (the scorecard's checks, the numbers the prose states) are collapsed in a ``<details>``
  element (consecutive ones in one), which a link to one of its checks opens;
- ``api/``: the API reference generated from the docstrings with pdoc (:func:`build_api_docs`);
- ``guide/``: the user guide, ``docs/*.md`` rendered with its links checked (:mod:`vrs_helpers.app.guide`).

Everything here is a function of the run results and the scorecard rows; nothing is printed.
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import html
import io
import math
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..literal import no_math
from .mathjax import MATHJAX_CONFIG, MATHJAX_DIR, MATHJAX_OUTPUT
from .scorecard import SCORECARD_MIME

API_DIR = "api"
THUMB_DIR = "thumbs"
CHECK_CELL_TAG = "check"  # the reproduction's bookkeeping (vrs_helpers.app.student): collapsed on a page
CHECK_CELL_SUMMARY = "Check (scorecard rows, the numbers the text states) — click to show"
KEY_FIGURE_TAG = "key-figure"  # a code cell tagged so gives the workbook's thumbnail (else its first figure)
STATUSES = ("true", "explained", "false")
_COLOUR = {"true": "#dafbe1", "explained": "#fff8c5", "false": "#ffebe9"}
_INK = {"true": "#1a7f37", "explained": "#9a6700", "false": "#cf222e"}


# ------------------------------------------------------------------------------------------- printed precision

def printed_digits(tolerance: float) -> int | None:
    """The decimals of the book's printed number from a scorecard tolerance (half a unit of its last digit,
    :func:`vrs_helpers.app.scorecard.tolerance_of`): 5e-4 -> 3, 0.05 -> 1, 0.5 -> 0. A tolerance that is not of that
    form gives the decimals that resolve it (0.01 -> 2); ``None`` for 0, NaN or a negative value."""
    try:
        tol = float(tolerance)
    except (TypeError, ValueError):
        return None
    if not tol > 0 or math.isinf(tol):
        return None
    return max(0, math.ceil(math.log10(0.5 / tol) - 1e-6))


def format_printed(value, tolerance, max_digits: int = 12) -> str:
    """``value`` at the printed precision its ``tolerance`` implies: ``format_printed(0.0050000000050000005,
    5e-4)`` -> ``'0.005'``. Values below 1e-4 are written in scientific notation with the same absolute precision
    (2.06247e-6 at tolerance 5e-12 -> ``'2.06247e-06'``). A tolerance below 5e-10 is a numerical one (an exact
    count or closed form checked to 1e-12), not a printed precision: 6 significant digits (0.75, not
    0.750000000000; 23/30 as 0.766667). Without a usable tolerance: 6 significant digits; NaN/None: an em dash."""
    if value is None:
        return "—"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(v):
        return "—"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    d = printed_digits(tolerance)
    if d is None or d > max_digits:
        return f"{v:.6g}"
    if v != 0 and abs(v) < 1e-4:
        significant = d + math.floor(math.log10(abs(v))) + 1
        if significant >= 1:
            return f"{v:.{significant - 1}e}"
    if d >= 10:   # a numerical tolerance (an exact count, a closed form checked to 1e-12), not a printed precision
        return f"{v:.6g}"
    text = f"{v:.{d}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text   # no "-0.000"


_PRINTED_BOUND = re.compile(r"\(printed '([^']+)'\)")


def book_text(row: dict) -> str:
    """The book's value as printed: a bound the quantity names (``(printed '< 0.001')``, see
    :meth:`vrs_helpers.app.scorecard.Scorecard.check_p`) verbatim, else the value at its printed precision."""
    m = _PRINTED_BOUND.search(str(row.get("quantity", "")))
    if m:
        return m.group(1)
    return format_printed(row.get("book"), row.get("tolerance"))


# ----------------------------------------------------------------------------------------------- check anchors

def check_anchor(ref: str, quantity: str) -> str:
    """An HTML id for a scorecard check: readable (from ``ref`` and ``quantity``) and unique for the pair."""
    text = f"{ref} {quantity}".lower()
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:60].strip("-")
    digest = hashlib.sha1(f"{ref}\x1f{quantity}".encode()).hexdigest()[:8]
    return f"check-{slug}-{digest}"


def anchors_for(rows: Iterable[dict]) -> list[str]:
    """The anchors of a notebook's scorecard rows in output order; a pair checked twice gets ``-2``, ``-3``."""
    seen: dict[str, int] = {}
    out = []
    for row in rows:
        a = check_anchor(str(row.get("ref", "")), str(row.get("quantity", "")))
        seen[a] = seen.get(a, 0) + 1
        out.append(a if seen[a] == 1 else f"{a}-{seen[a]}")
    return out


def _payload_rows(data: dict) -> list[dict]:
    import json

    payload = data[SCORECARD_MIME]
    payload = json.loads(payload) if isinstance(payload, str) else payload
    return [dict(r) for r in (payload if isinstance(payload, list) else [payload])]


def _with_row_ids(table_html: str, anchors: list[str]) -> str | None:
    """Put the anchors on the body rows of a one-table HTML output, in order; None when the rows do not match."""
    head, sep, body = table_html.partition("<tbody>")
    if not sep or body.count("<tr") != len(anchors):
        return None
    parts = re.split(r"<tr(?=[\s>])", body)
    rebuilt = parts[0] + "".join(f"<tr id=\"{a}\"{rest}" for a, rest in zip(anchors, parts[1:], strict=True))
    return head + sep + rebuilt


def add_check_anchors(nb):
    """A copy of an executed notebook whose scorecard outputs carry HTML ids (:func:`anchors_for`), so that the
    report can link each row to its place in the exported page. Only the copy's ``text/html`` changes (a wrapper
    ``div`` with the id, or ids on the rows of a table of checks): the notebook's own outputs, which nbval compares,
    stay as they are."""
    nb = copy.deepcopy(nb)
    seen: dict[str, int] = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if SCORECARD_MIME not in data:
                continue
            rows = _payload_rows(data)
            anchors = []
            for row in rows:
                a = check_anchor(str(row.get("ref", "")), str(row.get("quantity", "")))
                seen[a] = seen.get(a, 0) + 1
                anchors.append(a if seen[a] == 1 else f"{a}-{seen[a]}")
            shown = data.get("text/html")
            if shown is not None:
                shown = "".join(shown) if isinstance(shown, list) else shown
                if len(anchors) == 1:
                    data["text/html"] = f"<div id=\"{anchors[0]}\" class=\"vrs-check\">{shown}</div>"
                    continue
                with_ids = _with_row_ids(shown, anchors)
                if with_ids is not None:
                    data["text/html"] = with_ids
                    continue
            else:
                plain = data.get("text/plain", "")
                shown = f"<pre>{html.escape(''.join(plain) if isinstance(plain, list) else plain)}</pre>"
            spans = "".join(f"<span id=\"{a}\"></span>" for a in anchors)
            data["text/html"] = f"<div class=\"vrs-check\">{spans}{shown}</div>"
    return nb


def html_outputs_without_math(nb, copy_first: bool = True):
    """The notebook (a copy unless ``copy_first`` is false) with every ``text/html`` output in a ``div`` MathJax
    leaves alone (:func:`vrs_helpers.literal.no_math`). HTML outputs are tables and boxes of results whose text comes
    from the data (a system named ``$x$`` or ``\\(x\\)`` would otherwise be typeset as math); no workbook shows math
    in an HTML output (its Markdown does). Plain-text outputs are in ``pre``, which MathJax skips anyway."""
    if copy_first:
        nb = copy.deepcopy(nb)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            shown = data.get("text/html")
            if shown is not None:
                data["text/html"] = no_math("".join(shown) if isinstance(shown, list) else shown, "div")
    return nb


# ------------------------------------------------------------------------------------------- offline notebook pages

_PAGE_TEMPLATE = r"""{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({
  tex2jax: {inlineMath: [['$', '$'], ['\\(', '\\)']], displayMath: [['$$', '$$'], ['\\[', '\\]']],
            processEscapes: true, processEnvironments: true},
  """ + MATHJAX_OUTPUT + r"""
});
</script>
<script src="{{ resources.vrs_mathjax_url }}"></script>
<style>
.vrs-nav{font-family:sans-serif;font-size:14px;padding:8px 16px;background:#f6f8fa;border-bottom:1px solid #d0d7de}
.vrs-nav a{margin-right:1.5em}
.vrs-check:target, tr:target{outline:3px solid #0969da;background:#ddf4ff}
details.vrs-check-cell{margin:4px 0 4px 0;border-left:3px solid #d0d7de;padding-left:6px}
details.vrs-check-cell>summary{cursor:pointer;color:#57606a;font-family:sans-serif;font-size:13px;padding:2px 0}
</style>
<script>
/* a link to a scorecard check (#check-...) opens the collapsed check cell that holds it */
function vrsOpenTarget(){var id=location.hash.slice(1);var t=id&&document.getElementById(decodeURIComponent(id));
for(var e=t;e;e=e.parentElement){if(e.tagName==='DETAILS'){e.open=true;}}if(t){t.scrollIntoView();}}
window.addEventListener('hashchange',vrsOpenTarget);document.addEventListener('DOMContentLoaded',vrsOpenTarget);
</script>
{%- endblock html_head_js_mathjax -%}
{%- block any_cell scoped -%}
{%- set tag = '""" + CHECK_CELL_TAG + r"""' -%}
{%- if tag in cell.metadata.get('tags', []) -%}
{%- if not (loop.previtem and tag in loop.previtem.metadata.get('tags', [])) -%}
<details class="vrs-check-cell"><summary>""" + CHECK_CELL_SUMMARY + r"""</summary>
{%- endif %}
{{ super() }}
{%- if not (loop.nextitem and tag in loop.nextitem.metadata.get('tags', [])) %}
</details>
{%- endif -%}
{%- else -%}
{{ super() }}
{%- endif -%}
{%- endblock any_cell -%}
{%- block body_header -%}
{{ super() }}
{{ resources.vrs_nav }}
{%- endblock body_header -%}
"""


def mathjax_source() -> Path:
    """The MathJax 2.7 tree that the ``jupyter-server-mathjax`` package ships."""
    try:
        import jupyter_server_mathjax
    except ImportError as exc:
        raise ImportError("The report serves MathJax locally from the jupyter-server-mathjax package: "
                          "pip install jupyter-server-mathjax (it is a dependency of vrs-workbooks).") from exc
    static = Path(jupyter_server_mathjax.__file__).resolve().parent / "static"
    if not (static / "MathJax.js").is_file():
        raise FileNotFoundError(f"MathJax.js not found in {static}; reinstall jupyter-server-mathjax.")
    return static


def _mathjax_marker(src: Path) -> str:
    return f"{src}:{(src / 'MathJax.js').stat().st_size}"


def mathjax_current(html_dir: str | Path) -> bool:
    """Whether ``html_dir/mathjax`` is a complete copy of this installation's MathJax (:func:`copy_mathjax`)."""
    dest = Path(html_dir) / MATHJAX_DIR
    stamp = dest / ".vrs-source"
    return (stamp.is_file() and stamp.read_text() == _mathjax_marker(mathjax_source())
            and (dest / "MathJax.js").is_file())


def copy_mathjax(html_dir: str | Path) -> Path:
    """Copy MathJax into ``html_dir/mathjax`` (once: an existing copy of the same size is kept) and return it."""
    src = mathjax_source()
    dest = Path(html_dir) / MATHJAX_DIR
    stamp = dest / ".vrs-source"
    marker = _mathjax_marker(src)
    if mathjax_current(html_dir):
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)
    stamp.write_text(marker)
    return dest


def notebook_page(nb, *, mathjax_url: str = f"{MATHJAX_DIR}/MathJax.js?config={MATHJAX_CONFIG}",
                  nav_html: str = "", anchors: bool = True, exclude_input: bool = False) -> str:
    """An executed notebook (``nbformat`` node or path) as one HTML page that loads nothing from the internet:
    MathJax from ``mathjax_url`` (relative to the page), no require.js, mermaid or widget scripts; ``nav_html``
    is put at the top of the body; scorecard outputs get ids (:func:`add_check_anchors`); HTML outputs are kept from
    MathJax (:func:`html_outputs_without_math`). ``exclude_input``: a report without code (nbconvert's
    ``TemplateExporter.exclude_input``, with the input and output prompts): the Markdown and the outputs only."""
    import nbformat

    read = not hasattr(nb, "cells")
    if read:
        nb = nbformat.read(str(nb), as_version=4)
    if anchors:
        nb = add_check_anchors(nb)
    nb = html_outputs_without_math(nb, copy_first=not (read or anchors))
    body, _ = page_exporter(bool(exclude_input)).from_notebook_node(
        nb, resources={"vrs_mathjax_url": mathjax_url, "vrs_nav": nav_html})
    return body


@functools.lru_cache(maxsize=2)
def page_exporter(exclude_input: bool = False):
    """The nbconvert ``HTMLExporter`` of :func:`notebook_page` (lab template with the site's page template), made
    once per process and setting: its templates are compiled on first use (about 0.3 s), which the pages of a
    report site share. :func:`warm_page_exporter` compiles them ahead, e.g. while a notebook runs."""
    import jinja2
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab", template_file="vrs_page.html.j2",
                        extra_loaders=[jinja2.DictLoader({"vrs_page.html.j2": _PAGE_TEMPLATE})],
                        exclude_input=exclude_input, exclude_input_prompt=exclude_input,
                        exclude_output_prompt=exclude_input)


def warm_page_exporter(exclude_input: bool = False) -> None:
    """Import nbconvert and compile the templates of :func:`page_exporter` by rendering an empty notebook, so that
    the first real page costs only its rendering."""
    import nbformat

    notebook_page(nbformat.v4.new_notebook(), exclude_input=exclude_input, anchors=False)


def export_page(nb_path: str | Path, html_dir: str | Path, *, name: str | None = None, nav_html: str = "",
                exclude_input: bool = False) -> Path:
    """Write :func:`notebook_page` of ``nb_path`` to ``html_dir/<name or stem>.html`` with MathJax beside it
    (``exclude_input``: without the code cells' inputs)."""
    html_dir = Path(html_dir)
    html_dir.mkdir(parents=True, exist_ok=True)
    copy_mathjax(html_dir)
    out = html_dir / f"{name or Path(nb_path).stem}.html"
    out.write_text(notebook_page(nb_path, nav_html=nav_html, exclude_input=exclude_input), encoding="utf-8")
    return out


_URL_ATTR = re.compile(r"<(script|link|img|iframe|source|embed|audio|video)\b[^>]*?\b(src|href)\s*=\s*"
                       r"(\"[^\"]*\"|'[^']*'|[^\s>]+)", re.I)
_IMPORT = re.compile(r"""(?:\bimport\s*\(\s*|@import\s+(?:url\()?\s*|url\(\s*)["']?((?:https?:)?//[^"')\s]+)""", re.I)


def external_resources(page: str) -> list[str]:
    """The URLs a page would fetch from another host: ``src``/``href`` of script, link, img, iframe, source, embed,
    audio and video tags, CSS ``@import``/``url()`` and JS dynamic ``import()`` that start with http(s):// or //.
    Plain ``<a href>`` links are not resources (the page works without them)."""
    urls = []
    for m in _URL_ATTR.finditer(page):
        url = m.group(3).strip("\"'")
        if re.match(r"(?:https?:)?//", url, re.I):
            urls.append(url)
    urls += _IMPORT.findall(page)
    return urls


# ------------------------------------------------------------------------------------------------- the workbooks

def notebook_heading(nb) -> tuple[str, str]:
    """(title, book sections) of a workbook from its first Markdown heading: the parentheses that name sections
    ("(book 2.4.1)", "(2.4.2)", "(book section 3.3.1)", "(book ch. 4)") are taken out of the title and joined, e.g.
    ``# Validity: the bias test (book 2.4.1) and invariance (2.4.2)`` -> ("Validity: the bias test and
    invariance", "2.4.1, 2.4.2"); without one, a final parenthesis is the source ("Goyal, Hu & Gupta 2023").
    The notebook's ``metadata.vrs.sections`` overrides the sections."""
    title = ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if m:
                title = m.group(1).strip()
                break
    groups = list(re.finditer(r"\s*\(([^()]*)\)", title))
    refs = [g for g in groups if re.match(r"(?i)book\b|\d+(\.\d+)+", g.group(1).strip())]
    if not refs and groups and groups[-1].end() == len(title):
        refs = [groups[-1]]
    sections = ", ".join(re.sub(r"(?i)^book\s+(sections?\s+)?", "", g.group(1).strip()) for g in refs)
    for g in reversed(refs):
        title = title[:g.start()] + title[g.end():]
    title = re.sub(r"\s+", " ", re.sub(r"[*_`]", "", title)).strip()
    meta = nb.metadata.get("vrs", {}) if hasattr(nb, "metadata") else {}
    return title, str(meta.get("sections", sections))


def key_figure(nb) -> bytes | None:
    """The PNG of a workbook's key figure: the first ``image/png`` output of a cell tagged ``key-figure``, else
    the first ``image/png`` output of the notebook; None when it has none."""
    def pngs(cells):
        for cell in cells:
            for out in cell.get("outputs", []):
                png = out.get("data", {}).get("image/png")
                if png:
                    yield base64.b64decode("".join(png) if isinstance(png, list) else png)

    tagged = [c for c in nb.cells if KEY_FIGURE_TAG in c.get("metadata", {}).get("tags", [])]
    return next(pngs(tagged), None) or next(pngs(nb.cells), None)


def thumbnail(png: bytes, width: int = 480) -> bytes:
    """A PNG scaled down to ``width`` pixels (kept as it is when it is narrower or Pillow is missing)."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib
        return png
    img = Image.open(io.BytesIO(png))
    if img.width <= width:
        return png
    img = img.resize((width, round(img.height * width / img.width)), Image.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


@dataclass
class Workbook:
    """One workbook of the report: its runs (one per analysis) and what its card shows."""

    stem: str
    title: str
    sections: str
    pages: list[tuple[str, str, str]] = field(default_factory=list)  # (label, href, error)
    counts: dict = field(default_factory=dict)  # book rows by status
    seconds: float = float("nan")
    reference_counts: dict = field(default_factory=dict)  # reference rows by status
    thumbnail: str | None = None  # href of the thumbnail

    def __repr__(self) -> str:
        return f"Workbook({self.stem!r}, {len(self.pages)} pages, {self.counts})"


def _params_label(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"


def _stem(result) -> str:
    return Path(result.notebook).stem


def workbooks(results: list, html_dir: str | Path) -> list[Workbook]:
    """Group run results by notebook (in run order) and write each workbook's thumbnail into ``html_dir/thumbs``."""
    import nbformat

    html_dir = Path(html_dir)
    groups: dict[str, list] = {}
    for r in results:
        groups.setdefault(_stem(r), []).append(r)
    books = []
    for stem, runs in groups.items():
        nb = None
        for r in runs:
            if r.output is not None and Path(r.output).is_file():
                nb = nbformat.read(str(r.output), as_version=4)
                break
        title, sections = notebook_heading(nb) if nb is not None else (stem, "")
        counts = {s: 0 for s in STATUSES}
        reference = {}
        for r in runs:
            for row in r.scorecard:
                into = counts if row_kind(row) == "book" else reference
                into[str(row.get("match"))] = into.get(str(row.get("match")), 0) + 1
        seconds = [float(getattr(r, "seconds", float("nan"))) for r in runs]
        book = Workbook(stem, title or stem, sections,
                        [(_params_label(r.parameters), Path(r.html).name if r.html else "", r.error) for r in runs],
                        counts, math.fsum(seconds) if not any(math.isnan(s) for s in seconds) else float("nan"),
                        reference_counts=reference)
        png = key_figure(nb) if nb is not None else None
        if png:
            (html_dir / THUMB_DIR).mkdir(parents=True, exist_ok=True)
            (html_dir / THUMB_DIR / f"{stem}.png").write_bytes(thumbnail(png))
            book.thumbnail = f"{THUMB_DIR}/{stem}.png"
        books.append(book)
    return books


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "—"
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def _counts_html(counts: dict, reference: dict | None = None) -> str:
    text = " · ".join(f"<span class='n {s}'>{counts.get(s, 0)} {s}</span>" for s in STATUSES)
    if reference:
        text += (" <span class='ref'>(reference rows: " + " · ".join(
            f"<span class='n {s}'>{reference.get(s, 0)} {s}</span>" for s in STATUSES if s != "explained") + ")</span>")
    return text


def row_kind(row) -> str:
    """The kind of a scorecard row: "book" or "reference" (rows written before rows had a kind are book rows)."""
    kind = row.get("kind") if hasattr(row, "get") else None
    return "reference" if kind == "reference" else "book"


def headline(card: pd.DataFrame) -> str:
    """The report's first line: the book rows' counts, and apart the reference rows'."""
    kinds = card["kind"].fillna("book") if "kind" in card.columns else pd.Series("book", index=card.index)
    book, ref = card[kinds != "reference"], card[kinds == "reference"]
    counts = book["match"].value_counts().to_dict()
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES if s in counts) or "none"
    text = f"{len(book)} published numbers checked: {summary}."
    if len(ref):
        rc = ref["match"].value_counts().to_dict()
        text += (f" Apart from these, {len(ref)} reference checks (ours against lme4, mgcv or emmeans on the same "
                 f"data): " + ", ".join(f"{rc.get(s, 0)} {s}" for s in STATUSES if s in rc) + ".")
    return text


def _sections_label(sections: str) -> str:
    return f"book {sections}" if re.match(r"\d|ch\.", sections) else sections


def cards_html(books: list[Workbook], api_href: str | None = f"{API_DIR}/index.html") -> str:
    """The landing page's cards, one per workbook."""
    e = html.escape
    cards = []
    for b in books:
        first = next((href for _, href, _ in b.pages if href), "")
        img = (f"<a href='{e(first)}'><img src='{e(b.thumbnail)}' alt='key figure of {e(b.stem)}' loading='lazy'></a>"
               if b.thumbnail else "<div class='noimg'>no figure</div>")
        runs = "".join(
            f"<li>{f'<a href={chr(39)}{e(href)}{chr(39)}>{e(label)}</a>' if href else e(label)}"
            f"{' — <b class=failed>FAILED</b>: ' + e(err) if err else ''}</li>" for label, href, err in b.pages)
        api = f" · <a href='{e(api_href)}'>API reference</a>" if api_href else ""
        sections = f" · {e(_sections_label(b.sections))}" if b.sections else ""
        cards.append(
            f"<div class='card' id='wb-{e(b.stem)}'>{img}<h3><a href='{e(first)}'>{e(b.title)}</a></h3>"
            f"<p class='meta'><code>{e(b.stem)}</code>{sections}</p>"
            f"<p>{_counts_html(b.counts, b.reference_counts)}</p><p class='meta'>run time {_duration(b.seconds)} · "
            f"<a href='#sc-{e(b.stem)}'>its scorecard</a>{api}</p>"
            f"{'<ul class=runs>' + runs + '</ul>' if len(b.pages) > 1 or any(err for *_, err in b.pages) else ''}"
            f"</div>")
    return "<div class='cards'>" + "".join(cards) + "</div>"


def scorecard_html(results: list, books: list[Workbook]) -> str:
    """The scorecard grouped by workbook, analysis and book table; values at the printed precision, the alternative
    reference and the explanation shown, each row linking to the check in its notebook page."""
    e = html.escape
    titles = {b.stem: b for b in books}
    by_book: dict[str, list] = {}
    for r in results:
        by_book.setdefault(_stem(r), []).append(r)
    parts = []
    for stem, runs in by_book.items():
        counts = titles[stem].counts if stem in titles else {}
        reference = titles[stem].reference_counts if stem in titles else {}
        parts.append(f"<h3 id='sc-{e(stem)}'>{e(titles[stem].title if stem in titles else stem)} "
                     f"<small><code>{e(stem)}</code> · {_counts_html(counts, reference)}</small></h3>")
        if not any(r.scorecard for r in runs):
            parts.append("<p>No checks.</p>")
        for r in runs:
            if not r.scorecard:
                continue
            page = Path(r.html).name if r.html else ""
            if len(runs) > 1:
                parts.append(f"<h4>Analysis {e(_params_label(r.parameters))}</h4>")
            groups: dict[tuple, list] = {}
            for row, anchor in zip(r.scorecard, anchors_for(r.scorecard), strict=True):
                groups.setdefault((row_kind(row), str(row.get("ref", ""))), []).append((row, anchor))
            for (kind, ref), rows in groups.items():
                body = []
                for row, anchor in rows:
                    status = str(row.get("match"))
                    tol = row.get("tolerance")
                    alt = ""
                    if row.get("alternative"):
                        alt = (f"{e(str(row['alternative']))}: "
                               f"<b>{e(format_printed(row.get('alternative_value'), tol))}</b>")
                    link = f"<a href='{e(page)}#{e(anchor)}'>{e(str(row.get('quantity', '')))}</a>" if page else e(
                        str(row.get("quantity", "")))
                    body.append(
                        f"<tr class='{e(status)}'><td>{link}</td>"
                        f"<td class='num' title='{e(repr(row.get('book')))}'>{e(book_text(row))}</td>"
                        f"<td class='num' title='{e(repr(row.get('ours')))}'>{e(format_printed(row.get('ours'), tol))}"
                        f"</td><td class='st'>{e(status)}</td><td>{alt}</td>"
                        f"<td class='expl'>{e(str(row.get('explanation') or ''))}</td></tr>")
                caption = e(ref) if kind == "book" else (f"{e(ref)} <small>(reference rows: ours against another "
                                                         "implementation on the same data)</small>")
                parts.append(f"<table class='sc {kind}'><caption>{caption}</caption><tr><th>quantity</th>"
                             f"<th>{'book' if kind == 'book' else 'reference'}</th>"
                             f"<th>ours</th><th>match</th><th>alternative reference</th><th>explanation</th></tr>"
                             + "".join(body) + "</table>")
    return "".join(parts)


def coverage_html(books: list[Workbook] | None = None) -> str:
    """The coverage table of the book (``data/book/coverage.csv``), workbooks linked to their pages."""
    from ..book.data import coverage

    cov = coverage()
    pages = {b.stem: next((href for _, href, _ in b.pages if href), "") for b in (books or [])}
    counts = ", ".join(f"{v} {k}" for k, v in cov["status"].value_counts().items())
    e = html.escape
    rows = []
    for _, r in cov.iterrows():
        wb = str(r["workbook"])
        cell = f"<a href='{e(pages[wb])}'>{e(wb)}</a>" if pages.get(wb) else e(wb)
        rows.append(f"<tr class='cov-{e(str(r['status']).replace(' ', '-'))}'><td>{e(str(r['item']))}</td>"
                    f"<td>{e(str(r['section']))}</td><td>{e(str(r['status']))}</td><td>{cell}</td>"
                    f"<td>{e(str(r['note']))}</td></tr>")
    return (f"<p>{e(counts)}.</p><table class='cov'><tr><th>item</th><th>section</th><th>status</th>"
            f"<th>workbook</th><th>note</th></tr>" + "".join(rows) + "</table>")


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#1f2328}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:16px}
.card{border:1px solid #d0d7de;border-radius:8px;padding:12px;background:#fff}
.card img{width:100%;height:190px;object-fit:contain;background:#f6f8fa;border-radius:4px}
.card h3{font-size:1.05em;margin:.5em 0 .2em}.card .meta{color:#57606a;font-size:90%;margin:.2em 0}
.noimg{height:190px;background:#f6f8fa;color:#8c959f;display:flex;align-items:center;justify-content:center}
.ref{color:#57606a}.n.true{color:#1a7f37}.n.explained{color:#9a6700}.n.false{color:#cf222e}.failed{color:#cf222e}
table{border-collapse:collapse;margin:.4em 0 1em}table.sc{width:100%}
td,th{border:1px solid #d0d7de;padding:3px 8px;font-size:90%;
vertical-align:top}caption{text-align:left;font-weight:bold;padding:4px 0}td.num{text-align:right;
font-variant-numeric:tabular-nums;white-space:nowrap}td.expl{max-width:420px;color:#424a53}
tr.true{background:#dafbe1}tr.explained{background:#fff8c5}tr.false{background:#ffebe9}
h3 small{font-weight:normal;font-size:75%}nav a{margin-right:1.5em}
"""


def index_html(results: list, card: pd.DataFrame, books: list[Workbook],
               api_href: str | None = f"{API_DIR}/index.html") -> str:
    """The landing page: counts, workbook cards, the coverage table and the grouped scorecard."""
    api = f"<a href='{html.escape(api_href)}'>API reference</a>" if api_href else ""
    return f"""<!doctype html><html lang="en"><head><meta charset='utf-8'>
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vrs-workbooks: reproduction report</title><style>{_CSS}</style></head><body>
<h1>vrs-workbooks: reproduction report</h1>
<p><b>{html.escape(headline(card))}</b> <i>true</i>: within the book's printed
precision; <i>explained</i>: a second reference on the same data (lme4, mgcv, an exact recomputation) matches ours,
misses the book as well, and the notebook says why the book differs; <i>false</i>: not reproduced from the public
data (a finding; the notebook gives the reason). Reference rows compare ours with another implementation, not with
a printed number: they are not counted as reproductions. Values are shown at the book's printed precision (hover
for the full value).</p>
<nav><a href='#workbooks'>Workbooks</a><a href='#coverage'>Coverage of the book</a>
<a href='#scorecard'>Reproduction scorecard</a><a href='guide/index.html'>User guide</a>{api}</nav>
<h2 id='workbooks'>Workbooks</h2>
<p>Riezler &amp; Hagmann, <i>Validity, Reliability, and Significance</i>: the executed notebooks.</p>
{cards_html(books, api_href)}
<h2 id='coverage'>Coverage of the book</h2><p>Every numbered table and figure of sections 2.4, 3.3 and 4.1-4.3
(<code>data/book/coverage.csv</code>).</p>{coverage_html(books)}
<h2 id='scorecard'>Reproduction scorecard</h2>
<p>By workbook and book table; each quantity links to the check in its notebook page.</p>
{scorecard_html(results, books)}
</body></html>"""


def nav_html(api_href: str | None = f"{API_DIR}/index.html", index_href: str = "index.html",
             workbook: str | None = None) -> str:
    """The header of a notebook page in the report: back to the report, to the workbook's scorecard, to the API
    reference."""
    e = html.escape
    api = f"<a href='{e(api_href)}'>API reference (vrs_helpers)</a>" if api_href else ""
    card = f"#sc-{workbook}" if workbook else "#scorecard"
    return (f"<nav class='vrs-nav'><a href='{e(index_href)}'>← Reproduction report</a>"
            f"<a href='{e(index_href)}{e(card)}'>{'Scorecard of this workbook' if workbook else 'Scorecard'}</a>"
            f"<a href='guide/index.html'>User guide</a>{api}</nav>")


# ------------------------------------------------------------------------------------------------ API reference

def _package_modules(package: str = "vrs_helpers") -> tuple[str, ...]:
    """The package and every module and subpackage at its top level (pdoc walks the subpackages itself)."""
    import importlib
    import pkgutil

    root = importlib.import_module(package)
    return (package, *sorted(f"{package}.{m.name}" for m in pkgutil.iter_modules(root.__path__)
                             if not m.name.startswith("_")))


def build_api_docs(out_dir: str | Path = "build/html/api", modules: tuple[str, ...] | None = None) -> Path:
    """The API reference from the docstrings, with pdoc, into ``out_dir`` (``index.html`` and one page per module).

    pdoc reads the docstrings and signatures as they are (reStructuredText roles such as ``:func:`` become links),
    needs no configuration files and writes self-contained pages (no CDN: math and mermaid rendering are off).
    ``modules``: default the whole package, each layer with its modules (the front door's ``__all__`` lists the
    documented names, so pdoc would not walk the subpackages from it alone).
    """
    import pdoc
    import pdoc.render

    modules = _package_modules() if modules is None else modules
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    pdoc.render.configure(docformat="restructuredtext", show_source=False, math=False, mermaid=False,
                          search=True, footer_text="vrs-workbooks")
    pdoc.pdoc(*modules, output_directory=out)
    return out


# ----------------------------------------------------------------------------------------------------- the site

def api_link(api: bool) -> str | None:
    """The link from a page of the site to the API reference (None without one)."""
    return f"{API_DIR}/index.html" if api else None


def site_page(result, html_dir: str | Path, api: bool = True) -> Path | None:
    """Export the executed notebook of a run result as its page of the report site (with the site's header) into
    ``html_dir``, set ``result.html`` and return it (None when the run left no notebook)."""
    if result.output is None or not Path(result.output).is_file():
        return None
    result.html = export_page(result.output, html_dir, nav_html=nav_html(api_link(api), workbook=_stem(result)))
    return result.html


def build_site(results: list, card: pd.DataFrame, html_dir: str | Path = "build/html", *, api: bool = True,
               pages: bool = True, api_built: bool = False, guide: bool = True) -> Path:
    """Write the report site into ``html_dir``: the notebook pages of ``results`` (their executed notebooks,
    exported offline with a header; ``result.html`` is set to the page), MathJax, thumbnails, the API reference
    (``api=True``) and ``index.html``. Returns the index. ``pages=False``: the pages are written already
    (:func:`site_page`, ``result.html`` set); ``api_built``: so is the API reference (:func:`build_api_docs` into
    ``html_dir/api``) - ``vrs reproduce`` writes both while the notebooks run. ``guide``: the user guide into
    ``html_dir/guide`` (:func:`vrs_helpers.app.guide.build_guide`)."""
    html_dir = Path(html_dir)
    html_dir.mkdir(parents=True, exist_ok=True)
    copy_mathjax(html_dir)
    if api and not api_built:
        build_api_docs(html_dir / API_DIR)
    if pages:
        for r in results:
            site_page(r, html_dir, api)
    books = workbooks(results, html_dir)
    index = html_dir / "index.html"
    index.write_text(index_html(results, card, books, api_link(api)), encoding="utf-8")
    if guide:
        from .guide import GUIDE_DIR, build_guide

        build_guide(html_dir / GUIDE_DIR)   # after the pages: its links to them are checked
    return index

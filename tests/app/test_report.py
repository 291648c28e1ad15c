"""The report site: printed precision, offline notebook pages (local MathJax, no CDN), check anchors, workbook cards
with thumbnails, the API reference, and (when Chromium is installed) the site in a real headless browser."""

import base64
import importlib.util
import io
import re
import shutil

import nbformat
import pandas as pd
import pytest

from conftest import ROOT
from vrs_helpers.app import report, runner
from vrs_helpers.app.scorecard import COLUMNS, SCORECARD_MIME, Scorecard, _payload, extract, tolerance_of

MATH_MD = ("# Toy reliability workbook: the coefficient (book 9.9.1-9.9.2)\n\n"
           "The coefficient $\\varphi = \\frac{\\sigma_s^2}{\\sigma_s^2 + \\sigma_\\Delta^2}$ and\n\n"
           "$$\\hat\\sigma^2 = \\sum_i (x_i - \\bar x)^2 / (n - 1).$$")


def _png(width=900, height=600) -> bytes:
    from PIL import Image

    img = Image.new("RGB", (width, height), (30, 120, 200))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _bundle(check):
    return {"text/plain": repr(check), "text/html": check._repr_html_(), SCORECARD_MIME: _payload(check)}


def _executed_notebook(path, stem="01_toy"):
    """A notebook with outputs as `vrs run` leaves it (built by hand: no kernel needed)."""
    card = Scorecard(stem)
    checks = [
        card.check("Table 9.1", "percent of variance", 0.005, 0.0050000000050000005, printed="0.005", show=False),
        card.check("Table 9.1", "sentence variance", 0.31, 0.2987, printed="0.31", alternative="lme4 1.1-31",
                   alternative_value=0.29874, explanation="the book rounded an earlier fit", show=False),
        card.check("Table 9.2", "accuracy", 98.1, 97.6514, printed="98.1",
                   explanation="the public predictions differ", show=False),
    ]
    card._pending = []
    p_check = card.check_p("Table 9.2", "GLRT p-value", "< 0.001", 3.2e-9, show=False)
    card._pending = [p_check]
    flushed = nbformat.v4.new_code_cell("card.flush()")
    rows = [_payload(p_check)]
    flushed.outputs = [nbformat.v4.new_output("display_data", data={
        "text/plain": "1 scorecard checks recorded: {'true': 1}", SCORECARD_MIME: rows,
        "text/html": pd.DataFrame(rows)[COLUMNS[2:]].to_html(index=False)})]
    nb = nbformat.v4.new_notebook()
    fig = nbformat.v4.new_code_cell("plot()")
    fig.outputs = [nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(_png()).decode(),
                                                                "text/plain": "<Figure>"})]
    shown = nbformat.v4.new_code_cell("checks")
    shown.outputs = [nbformat.v4.new_output("display_data", data=_bundle(c)) for c in checks]
    nb.cells = [nbformat.v4.new_markdown_cell(MATH_MD), fig, shown, flushed]
    nbformat.write(nb, str(path))
    return path


def _result(path, seconds=75.4):
    rows, scalars = extract(path)
    return runner.RunResult(path.stem + ".ipynb", path, None, {}, rows, scalars, "", seconds=seconds)


# ------------------------------------------------------------------------------------------- printed precision

@pytest.mark.parametrize("printed", ["0.005", "0.00304", "12", "14.2", "98.10", "0.5", "1234.5678"])
def test_printed_digits_from_the_tolerance(printed):
    decimals = len(printed.split(".")[1]) if "." in printed else 0   # counted from the text, independently
    assert report.printed_digits(tolerance_of(printed)) == decimals
    assert report.format_printed(float(printed), tolerance_of(printed)) == printed


def test_values_at_the_printed_precision():
    assert report.format_printed(0.0050000000050000005, tolerance_of("0.005")) == "0.005"
    assert report.format_printed(97.6514, tolerance_of("98.1")) == "97.7"
    assert report.format_printed(2.06247e-6, tolerance_of("2.06247e-6")) == "2.06247e-06"
    assert report.format_printed(-0.001, tolerance_of("0.5")) == "0.0"            # no "-0.0"
    assert report.format_printed(float("nan"), 0.5) == "—" and report.format_printed(None, 0.5) == "—"
    assert report.format_printed(1 / 3, 0.0) == "0.333333"                         # no printed precision: 6 digits
    assert report.format_printed(0.7500000000001, 1e-12) == "0.75" and report.format_printed(10.0, 1e-12) == "10"
    assert report.format_printed(23 / 30, 1e-12) == "0.766667"
    assert report.format_printed(0.1234567, tolerance_of("0.1234567")) == "0.1234567"
    assert report.printed_digits(0.01) == 2                                        # resolves a non-standard tolerance
    assert report.book_text({"quantity": "GLRT p-value (printed '< 0.001')", "book": 0.0005,
                             "tolerance": 0.0005}) == "< 0.001"


# ------------------------------------------------------------------------------------------------ offline pages

def test_notebook_page_loads_nothing_from_a_cdn(tmp_path):
    nb = _executed_notebook(tmp_path / "01_toy.ipynb")
    from nbconvert import HTMLExporter

    default, _ = HTMLExporter().from_notebook_node(nbformat.read(str(nb), as_version=4))
    assert report.external_resources(default), "nbconvert's default page loads MathJax and require.js from a CDN"
    page = report.export_page(nb, tmp_path / "html", nav_html=report.nav_html())
    text = page.read_text()
    assert report.external_resources(text) == []
    assert not re.search(r"<(?:script|link)[^>]+(?:src|href)=[\"'](?:https?:)?//", text)
    src = re.search(r"<script src=\"([^\"?]+)[^\"]*\"></script>", text).group(1)
    assert src == "mathjax/MathJax.js" and (tmp_path / "html" / src).is_file()
    assert "\\varphi" in text and "API reference" in text and "index.html" in text


def test_exclude_input_keeps_markdown_and_outputs_only(tmp_path):
    """`vrs analyze` (without --show-code) and `vrs run --no-input`: nbconvert's exclude_input leaves out every
    code cell's input and the prompts; the Markdown (with its math) and every output stay, MathJax still local."""
    nb = _executed_notebook(tmp_path / "01_toy.ipynb")
    code = '<div class="jp-CodeMirrorEditor'   # a code cell's input (the class also appears in the page's CSS)
    full = report.notebook_page(nb)
    bare = report.export_page(nb, tmp_path / "html", exclude_input=True).read_text()
    assert full.count(code) == 3 and code not in bare
    assert ">flush<" in full and ">flush<" not in bare and ">plot<" in full and ">plot<" not in bare
    assert bare.count('class="jp-OutputArea jp-Cell-outputArea"') == full.count(
        'class="jp-OutputArea jp-Cell-outputArea"') == 3
    assert "\\varphi" in bare and "data:image/png;base64" in bare and "Table 9.2" in bare
    assert "jp-InputPrompt" not in bare.split("<body", 1)[1] and report.external_resources(bare) == []


def test_external_resources_finds_every_kind():
    page = ("<script src='https://cdn.example/x.js'></script><link rel=stylesheet href=//cdn.example/a.css>"
            "<img src=\"http://host/i.png\"><style>@import url('https://fonts.example/f.css');</style>"
            "<script>import(\"https://esm.example/m.mjs\")</script><a href='https://book.example'>a link</a>"
            "<script src='mathjax/MathJax.js'></script>")
    assert report.external_resources(page) == ["https://cdn.example/x.js", "//cdn.example/a.css",
                                                "http://host/i.png", "https://fonts.example/f.css",
                                                "https://esm.example/m.mjs"]


def test_check_anchors_survive_the_export_and_keep_the_outputs(tmp_path):
    nb_path = _executed_notebook(tmp_path / "01_toy.ipynb")
    nb = nbformat.read(str(nb_path), as_version=4)
    before = nbformat.writes(nb)
    text = report.notebook_page(nb)
    assert nbformat.writes(nb) == before                       # the notebook's own outputs are untouched
    rows, _ = extract(nb)
    anchors = report.anchors_for(rows)
    assert len(set(anchors)) == len(rows) == 4
    for a in anchors:
        assert f'id="{a}"' in text
    assert report.check_anchor("Table 9.1", "x") != report.check_anchor("Table 9.1", "y")
    assert report.anchors_for([{"ref": "T", "quantity": "q"}] * 2)[1].endswith("-2")


# ---------------------------------------------------------------------------------------------------- the site

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    results = [_result(_executed_notebook(tmp / "01_toy.ipynb"))]
    card = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for res in results for r in res.scorecard], columns=COLUMNS)
    index = report.build_site(results, card, tmp / "html", api=False)
    return tmp / "html", index, results


def test_index_has_cards_figures_rounded_values_and_row_links(site):
    html_dir, index, results = site
    text = index.read_text()
    shown = re.sub(r"title='[^']*'", "", text)                                 # the full value only on hover
    assert "0.0050000000050000005" not in shown and ">0.005<" in text
    assert "title='0.0050000000050000005'" in text
    assert ">97.7<" in text and ">0.299<" not in text and ">0.30<" in text   # ours and lme4 at 2 decimals
    assert "&lt; 0.001" in text                                                # a bound as printed
    thumb = html_dir / "thumbs" / "01_toy.png"
    assert "src='thumbs/01_toy.png'" in text and thumb.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    assert Image.open(thumb).width == 480                                      # scaled down from 900
    assert "Toy reliability workbook: the coefficient" in text and "book 9.9.1-9.9.2" in text
    assert "2 true" in text and "1 explained" in text and "1 false" in text
    assert "1 min 15 s" in text                                                # run time
    assert "the book rounded an earlier fit" in text and "lme4 1.1-31" in text
    assert "<caption>Table 9.1</caption>" in text and "<caption>Table 9.2</caption>" in text
    page = (html_dir / "01_toy.html").read_text()
    links = re.findall(r"href='01_toy\.html#([^']+)'", text)
    assert len(links) == 4 and all(f'id="{a}"' in page for a in links)
    assert 'href="index.html#sc-01_toy"' in page and "id='sc-01_toy'" in text     # and back to its scorecard
    assert "Coverage of the book" in text and "Table 2.1" in text


def test_thumbnail_prefers_a_cell_tagged_key_figure(tmp_path):
    nb = nbformat.read(str(_executed_notebook(tmp_path / "01_toy.ipynb")), as_version=4)
    key = nbformat.v4.new_code_cell("key()")
    key.metadata["tags"] = [report.KEY_FIGURE_TAG]
    small = _png(100, 50)
    key.outputs = [nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(small).decode()})]
    nb.cells.append(key)
    assert report.key_figure(nb) == small
    nb.cells = nb.cells[:1]
    assert report.key_figure(nb) is None


def test_notebook_heading():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Agreement *paradoxes* (book section 3.3.1)")])
    assert report.notebook_heading(nb) == ("Agreement paradoxes", "3.3.1")
    nb.cells[0].source = "# Significance (book ch. 4)"
    assert report.notebook_heading(nb) == ("Significance", "ch. 4")
    nb.cells[0].source = "# Validity: the bias test (book 2.4.1) and invariance (2.4.2)\n\ntext"
    assert report.notebook_heading(nb) == ("Validity: the bias test and invariance", "2.4.1, 2.4.2")
    nb.cells[0].source = "# Significance with model-based metrics (Goyal, Hu & Gupta 2023)"
    assert report.notebook_heading(nb) == ("Significance with model-based metrics", "Goyal, Hu & Gupta 2023")
    nb.cells[0].source = "# Your results (book 3.3, 4.3; ICLR 2023)"
    assert report.notebook_heading(nb) == ("Your results", "3.3, 4.3; ICLR 2023")
    nb.metadata["vrs"] = {"sections": "4.1-4.3"}
    assert report.notebook_heading(nb)[1] == "4.1-4.3"


def test_api_reference_documents_the_public_functions(tmp_path):
    from vrs_helpers.app.cli import main

    assert main(["docs", "--out", str(tmp_path / "api")]) == 0     # `vrs docs` = report.build_api_docs + the guide
    out = tmp_path / "api"
    assert (out / "index.html").is_file()
    assert (tmp_path / "guide" / "index.html").is_file()   # beside it, its links to the API checked (tests/test_docs)
    page = (out / "vrs_helpers" / "book" / "glrt.html").read_text()
    assert 'id="compare_systems"' in page and "GLRT" in page
    from vrs_helpers.book import glrt

    first_line = glrt.compare_systems.__doc__.strip().splitlines()[0].split("(")[0].strip()
    assert first_line.split()[0] in page
    assert report.external_resources(page) == []
    for module in ("app/scorecard", "book/reliability", "book/agreement", "app/report"):
        assert (out / "vrs_helpers" / f"{module}.html").is_file()


def test_reproduce_builds_the_site(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell("x = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# A stand-in workbook (book 1.1)\n\nMath: $x^2$"), params,
                nbformat.v4.new_code_cell("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                                          "%matplotlib inline\nplt.plot([1, 2, 3]); plt.show()"),
                nbformat.v4.new_code_cell("from vrs_helpers.app.scorecard import Scorecard\n"
                                          "Scorecard('01_stand_in').check('Table 1.1', 'one third', 0.333, 1 / 3,"
                                          " printed='0.333')")]
    src = tmp_path / "01_stand_in.ipynb"
    nbformat.write(nb, str(src))
    results, card = runner.reproduce([src], build_dir=tmp_path / "build", progress=False)
    html_dir = tmp_path / "build" / "html"
    assert results[0].seconds > 0 and results[0].html == html_dir / "01_stand_in.html"
    index = (html_dir / "index.html").read_text()
    assert "0.3333333333333333" not in re.sub(r"title='[^']*'", "", index) and ">0.333<" in index
    assert "thumbs/01_stand_in.png" in index
    assert "href='api/index.html'" in index and (html_dir / "api" / "index.html").is_file()
    page = results[0].html.read_text()
    assert report.external_resources(page) == [] and "api/index.html" in page
    assert (html_dir / "mathjax" / "MathJax.js").is_file()


# ---------------------------------------------------------------------------------- in a real browser (Chromium)

def _check_site_module():
    spec = importlib.util.spec_from_file_location("check_site", ROOT / "tools" / "check_site.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


check_site = _check_site_module()
requires_chromium = pytest.mark.skipif(check_site.find_browser() is None,
                                       reason="no Chromium on PATH (Debian: apt-get install chromium)")


@requires_chromium
def test_the_site_renders_offline_in_chromium(site, tmp_path, capsys):
    html_dir, _, _ = site
    assert check_site.main([str(html_dir), "--out", str(tmp_path)]) == 0, capsys.readouterr()
    assert (tmp_path / "index.png").stat().st_size > 10_000 and (tmp_path / "notebook.png").is_file()
    out = capsys.readouterr().out
    assert re.search(r"01_toy\.html: [1-9]\d* formulas rendered, 0 internet requests, ok", out)
    assert re.search(r"guide/verdict\.html: [1-9]\d* formulas rendered, 0 internet requests, ok", out)  # the guide


@requires_chromium
def test_the_browser_check_fails_on_a_cdn_and_on_raw_math(site, tmp_path):
    html_dir, _, _ = site
    bad = tmp_path / "html"
    shutil.copytree(html_dir, bad)
    page = bad / "01_toy.html"
    page.write_text(page.read_text().replace('<script src="mathjax/MathJax.js',
                                             '<script src="https://cdn.example.org/MathJax.js'))
    problems = check_site.check_site(bad, tmp_path / "shots", check_site.find_browser())
    assert any("requested https://cdn.example.org/MathJax.js" in p for p in problems)
    assert any("raw TeX" in p for p in problems)


def test_headline_counts_book_rows_only(tmp_path):
    """Reference rows (ours against lme4 / mgcv / emmeans) are not reproductions of the book: the headline and the
    workbook cards count book rows, the reference rows are counted and shown apart (issue 23)."""
    card = Scorecard("01_ref")
    checks = [card.check("Table 9.1", "a", 0.5, 0.5, printed="0.5", show=False),
              card.check("Table 9.1", "b", 0.5, 0.9, printed="0.5", explanation="differs", show=False),
              card.check_reference("Table 9.1 (mgcv, test set)", "a", 0.50001, 0.5, 1e-4, show=False),
              card.check_reference("Table 9.1 (mgcv, test set)", "c", 0.7, 0.8, 1e-4, show=False)]
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("checks")
    cell.outputs = [nbformat.v4.new_output("display_data", data=_bundle(c)) for c in checks]
    nb.cells = [nbformat.v4.new_markdown_cell("# Reference rows (book 9.9)"), cell]
    path = tmp_path / "01_ref.ipynb"
    nbformat.write(nb, str(path))
    results = [_result(path)]
    frame = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in results[0].scorecard], columns=COLUMNS)
    assert list(frame["kind"]) == ["book", "book", "reference", "reference"]
    assert report.headline(frame) == ("2 published numbers checked: 1 true, 1 false. Apart from these, 2 reference "
                                      "checks (ours against lme4, mgcv or emmeans on the same data): 1 true, 1 false.")
    text = report.build_site(results, frame, tmp_path / "html", api=False).read_text()
    assert "2 published numbers checked: 1 true, 1 false." in text
    book = report.workbooks(results, tmp_path / "html")[0]
    assert book.counts == {"true": 1, "explained": 0, "false": 1} and book.reference_counts == {"true": 1, "false": 1}
    assert "(reference rows: ours against another implementation on the same data)" in text
    assert "<th>reference</th>" in text and "<table class='sc reference'>" in text
    # a scorecard written before rows had a kind: every row is a book row
    assert report.headline(frame.drop(columns="kind")).startswith("4 published numbers checked")


# --------------------------------------------------------------------- check cells collapsed (issue 53)

def _with_a_check_cell(tmp_path):
    """The toy workbook with its cell of scorecard checks tagged ``check``, as the book workbooks tag theirs."""
    nb = nbformat.read(str(_executed_notebook(tmp_path / "01_toy.ipynb")), as_version=4)
    nb.cells[2].metadata["tags"] = ["check"]
    note = nbformat.v4.new_markdown_cell("The checks of Table 9.1 and 9.2.")
    note.metadata["tags"] = ["check"]
    nb.cells.insert(2, note)   # consecutive check cells: one collapsed group
    return nb


def test_check_cells_are_collapsed_on_a_page(tmp_path):
    nb = _with_a_check_cell(tmp_path)
    text = report.notebook_page(nb)
    assert text.count('<details class="vrs-check-cell">') == 1 and "<details open" not in text
    start, end = text.index('<details class="vrs-check-cell">'), text.index("</details>")
    inside, outside = text[start:end], text[:start] + text[end:]
    assert report.CHECK_CELL_SUMMARY in inside and "The checks of Table 9.1" in inside
    rows, _ = extract(nb)
    anchors = report.anchors_for(rows)
    assert all(f'id="{a}"' in inside for a in anchors[:3])     # the checks of the tagged cell, inside
    assert f'id="{anchors[3]}"' in outside                     # the flushed check of an untagged cell, outside
    assert "<img" in outside and "<img" not in inside and "vrsOpenTarget" in text   # a link opens a check
    assert report.external_resources(text) == []


@requires_chromium
def test_a_link_to_a_check_opens_its_collapsed_cell(tmp_path):
    """In a real browser the check cell is closed, and a link to one of its checks (the scorecard's row links)
    opens it."""
    import subprocess

    nb = _with_a_check_cell(tmp_path)
    page = tmp_path / "01_toy.html"
    page.write_text(report.notebook_page(nb), encoding="utf-8")
    anchor = report.anchors_for(extract(nb)[0])[0]
    browser = check_site.find_browser()

    def dom(url):
        args = [browser, *check_site.QUIET, *check_site.OFFLINE, f"--user-data-dir={tmp_path}/profile",
                "--virtual-time-budget=5000", "--dump-dom", url]
        return subprocess.run(args, capture_output=True, text=True, timeout=180).stdout

    closed = dom(page.as_uri())
    assert '<details class="vrs-check-cell">' in closed and "<details class=\"vrs-check-cell\" open" not in closed
    opened = dom(page.as_uri() + "#" + anchor)
    assert re.search(r'<details class="vrs-check-cell" open(="")?>', opened), opened[:500]

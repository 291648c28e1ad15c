"""Issue 37 (hostile and careless input): names from the data - systems, items, tasks, models, the columns of the
score, system, item and run - that look like HTML, Markdown, TeX or script go through ``vrs analyze`` (a score table,
and harness logs) into report.html as text: the page has no element, attribute or script of its own from them, its
text holds each name as it is, and the names are outside every place MathJax typesets."""

import string
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from vrs_helpers.app import cli

HOSTILE = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", r"$\href{javascript:x}{y}$", "*a*", "_b_",
           "`c`", "[l](javascript:x)", "&amp;", "|", "a\nb", "# h", "$$x$$", r"\(x\)", r"\[x\]",
           r"\begin{equation}x\end{equation}", r"\ref{x}", "x\\", "<!-- c -->", "&#60;b&#62;", "~~s~~", "{}",
           "<https://x.org>", "'\"", "%s {0}"]
# text as a data file holds it (no NUL, no C0/C1 controls other than tab and line feed, no surrogates)
CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00").filter(
    lambda c: c in "\t\n" or not (ord(c) < 32 or 127 <= ord(c) < 160))
PIECE = st.one_of(st.sampled_from(HOSTILE), st.text(CHARS, max_size=6), st.sampled_from(list(string.punctuation)))
NAME = st.lists(PIECE, min_size=1, max_size=4).map("".join)

# what the exported notebook page is made of (nbconvert's lab template, pandas' tables, the verdict box, figures)
PAGE_TAGS = {"html", "head", "meta", "title", "style", "script", "body", "main", "div", "span", "p", "a", "b", "i",
             "em", "strong", "code", "pre", "h1", "h2", "h3", "h4", "ul", "ol", "li", "table", "thead", "tbody",
             "tr", "th", "td", "img", "br", "sub", "sup", "figure", "figcaption", "details", "summary"}
PAGE_ATTRIBUTES = {"class", "id", "style", "href", "src", "alt", "type", "charset", "name", "content", "lang", "open",
                   "border", "tabindex", "scoped", "data-mime-type", "data-jp-theme-light", "data-jp-theme-name"}
# a workbook page's scripts: MathJax's configuration and code, and the site's own (a link opens a collapsed check)
PAGE_SCRIPTS = [{"type": "text/x-mathjax-config"}, {"src": "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"},
                {}]
# where MathJax 2 (tex2jax) looks for no math: these elements and any element of class tex2jax_ignore
NO_MATH_TAGS = {"script", "noscript", "style", "textarea", "pre", "code"}
MATH_STARTS = ("$", "\\(", "\\[", "\\begin", "\\ref", "\\eqref")


class Page(HTMLParser):
    """The elements of a page (tag, attributes, in order), its body text, the text MathJax would scan, and the text
    of its scripts."""

    VOID = {"meta", "img", "br", "hr", "link", "input", "source", "wbr", "col", "area", "base", "embed"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements, self.stack, self.body, self.scanned, self.scripts = [], [], [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a))
        if tag not in self.VOID:
            self.stack.append((tag, (a.get("class") or "").split()))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        tags = [t for t, _ in self.stack]
        if "script" in tags:
            self.scripts.append(data)
        if "body" not in tags:
            return
        self.body.append(data)
        if not (NO_MATH_TAGS & set(tags) or any("tex2jax_ignore" in c for _, c in self.stack)):
            self.scanned.append(data)


def _read(path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def _words(text: str) -> str:
    return " ".join(text.split())


def assert_names_are_text(page: Page, names, scripts=None, math=None):
    """No element, attribute or script from the names; each name in the body's text as it is (white space as a
    browser collapses it); no name where MathJax looks for math (``math``; default: when the page loads MathJax,
    ``scripts`` None; vrs analyze's report loads none, but the same HTML is Jupyter's display of a result, which
    MathJax typesets)."""
    math = scripts is None if math is None else math
    tags = {t for t, _ in page.elements}
    assert tags <= PAGE_TAGS, tags - PAGE_TAGS
    attributes = {k for _, a in page.elements for k in a}
    assert attributes <= PAGE_ATTRIBUTES, attributes - PAGE_ATTRIBUTES
    assert [a for t, a in page.elements if t == "script"] == (PAGE_SCRIPTS if scripts is None else scripts)
    assert not any(n in s for s in page.scripts for n in names if _words(n))
    for t, a in page.elements:
        if t == "img":
            assert a["src"].startswith("data:image/png;base64,"), a
        if "href" in a:
            assert a["href"].startswith(("#", "https://")), a
    body, scanned = _words("".join(page.body)), [_words(s) for s in page.scanned]
    for n in names:
        assert _words(n) in body, n
        if math and any(m in n for m in MATH_STARTS):
            assert not any(_words(n) in s for s in scanned), n


def _scores(systems, items, columns, seed=0) -> pd.DataFrame:
    sys_col, item_col, run_col, score_col = columns
    rng = np.random.default_rng(seed)
    effect = rng.normal(0, 1, len(items))
    return pd.DataFrame([{sys_col: s, run_col: f"r{r}", item_col: it, score_col: 0.4 * k + e + rng.normal(0, 0.5)}
                         for k, s in enumerate(systems) for r in range(3) for it, e in zip(items, effect, strict=True)])


def _analyze(df, columns, out) -> int:
    sys_col, item_col, run_col, score_col = columns
    path = out.parent / f"{out.name}.parquet"
    df.to_parquet(path)
    return cli.main(["analyze", str(path), f"--response={score_col}", f"--system={sys_col}", f"--item={item_col}",
                     f"--replication={run_col}", "--n-resamples=99", f"--out={out}"])


def _distinct(names, n):
    """n names, distinct and not inside one another: each gets its own tag."""
    return [f"{name}·{k}" for k, name in enumerate((names * n)[:n])]


@settings(max_examples=4, deadline=None, phases=[Phase.explicit, Phase.generate],   # a run takes ~10 s: no shrinking
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(names=st.lists(NAME, min_size=8, max_size=8))
@example(names=["<script>alert(1)</script>", r"$\href{javascript:x}{y}$", "<img src=x onerror=alert(1)>",
                "*a* _b_ `c` [l](javascript:x)", "&amp; | a\nb", r"\(x\) $$y$$", "# h", "x" * 300])
@example(names=["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "*a* _b_", "[l](javascript:x) `c`",
                "&amp; | a\nb", "# h", "~~s~~", "<b>bold</b>"])   # no "$": the markup alone (the old report drew it)
@example(names=["A", "B", "sys", "\\begin{equation}x\\end{equation}a\nb", "run", "score", "i1", "i2"])  # the
# boundary note named the system x item term by the model's internal name (hypothesis found it)
def test_hostile_names_in_a_score_table_are_text_in_the_report(tmp_path_factory, capsys, names):
    """Two systems, three runs each, four items and the four key columns named by ``names`` (each made distinct
    by a suffix): the report is written and shows every name as text. (Before issue 37 the first example failed
    the report - matplotlib could not parse the names as math - and the second put an ``onerror`` attribute and a
    ``script`` element into it.)"""
    systems, columns, items = _distinct(names[:2], 2), _distinct(names[2:6], 4), _distinct(names[6:] + names, 4)
    out = tmp_path_factory.mktemp("hostile") / "report"
    code = _analyze(_scores(systems, items, columns), columns, out)
    assert code == 0, capsys.readouterr().err
    page = _read(out / "report.html")
    assert_names_are_text(page, systems + columns[:2] + columns[3:], scripts=[], math=True)


def test_hostile_task_and_model_names_in_logs_are_text_in_the_report(tmp_path, capsys):
    """`vrs analyze LOGDIR`: lm-evaluation-harness logs whose model and task names are markup (a task name is a
    file name there: no "/")."""
    from vrs_helpers.evaluate.logs.readers.writers import simulate_binary, write_lm_eval

    models = ["<script>alert(1)</script>", r"$\href{javascript:x}{y}$ *a*"]
    tasks = ["<img src=x onerror=alert(1)>", "[l](javascript:x) `c` &amp;"]
    truth = simulate_binary(3, systems=models, tasks=tasks, items=30, runs=2, run_sd=0.3)
    write_lm_eval(truth, tmp_path / "logs")
    out = tmp_path / "report"
    code = cli.main(["analyze", str(tmp_path / "logs"), "--test", "chisq", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    page = _read(out / "report.html")
    assert_names_are_text(page, models + tasks, scripts=[], math=True)


@pytest.mark.parametrize("bad", ["<b>x</b>", "<script>x</script>"])
def test_the_check_sees_markup_control(bad):
    """Control: a page with an element from a name fails the check (so the tests above can fail)."""
    page = Page()
    page.feed(f"<html><body><p>{bad}</p></body></html>")
    with pytest.raises(AssertionError):
        assert_names_are_text(page, [bad], scripts=[])


def test_the_check_sees_math_control():
    """Control: a name MathJax would typeset (outside an ignored element) fails the check."""
    page = Page()
    mathjax = "".join(f"<script {' '.join(f'{k}={v!r}' for k, v in a.items())}></script>" for a in PAGE_SCRIPTS)
    page.feed(f"<html><head>{mathjax}</head><body><p>$x$</p></body></html>")
    with pytest.raises(AssertionError):
        assert_names_are_text(page, ["$x$"])
    ok = Page()
    ok.feed(f'<html><head>{mathjax}</head><body><p><span class="tex2jax_ignore">$x$</span></p></body></html>')
    assert_names_are_text(ok, ["$x$"])


def test_exported_page_keeps_html_outputs_from_mathjax():
    """report.notebook_page: a table output holding "$x$" and "\\(y\\)" (pandas escapes markup, not math) is in an
    element MathJax skips; the Markdown cell's own math is not."""
    import nbformat

    from vrs_helpers.app.report import notebook_page

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("frame")
    frame = pd.DataFrame({"system": [r"$x$ \(y\)"], "score": [1.0]})
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": frame.to_html(),
                                                                   "text/plain": "frame"})]
    nb.cells = [nbformat.v4.new_markdown_cell("The coefficient $\\phi$."), cell]
    page = Page()
    page.feed(notebook_page(nb, exclude_input=True))
    assert_names_are_text(page, [r"$x$ \(y\)"])
    assert any("$\\phi$" in t for t in page.scanned)   # control: the Markdown's math is typeset
    assert nb.cells[1].outputs[0]["data"]["text/html"] == frame.to_html()   # the notebook itself is unchanged


def _check_site():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tools" / "check_site.py"
    spec = importlib.util.spec_from_file_location("check_site", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(_check_site().find_browser() is None, reason="no Chromium on PATH")
def test_mathjax_in_chromium_typesets_no_name(tmp_path, capsys):
    """The report's HTML under MathJax, as Jupyter shows a result (its display typesets math): the report with
    MathJax 2.7 added, opened in Chromium offline, typesets a formula beside the report (the control) and nothing
    from the names; no element from the names in the DOM the scripts leave."""
    import re

    from vrs_helpers.app.mathjax import MATHJAX_CONFIG
    from vrs_helpers.app.report import copy_mathjax

    names = [r"$\href{javascript:x}{y}$", "<img src=x onerror=alert(1)>", r"\(zq\) $$wq$$", "<script>alert(2)</script>",
             "item", "run", "score"]
    systems, columns = _distinct(names[:2], 2), [names[2] + "·c", names[3] + "·c", "run", "score"]
    out = tmp_path / "report"
    assert _analyze(_scores(systems, ["i1", "i2", "i3", "i4"], columns), columns, out) == 0, capsys.readouterr().err
    copy_mathjax(tmp_path)
    typeset = tmp_path / "typeset.html"
    head = ('<script type="text/x-mathjax-config">MathJax.Hub.Config({tex2jax: {inlineMath: [["$", "$"], '
            '["\\\\(", "\\\\)"]], processEscapes: true}});</script>'
            f'<script src="mathjax/MathJax.js?config={MATHJAX_CONFIG}"></script>')
    page = (out / "report.html").read_text(encoding="utf-8")
    typeset.write_text(page.replace("</head>", head + "</head>", 1).replace("<body>", "<body><p>$\\phi_{control}$</p>",
                                                                              1), encoding="utf-8")
    check = _check_site()
    dom, requested = check.run_browser(check.find_browser(), typeset)
    assert requested == [] and "</html>" in dom
    tex = re.findall(r'<script type="math/tex[^"]*"[^>]*>(.*?)</script>', dom, re.S)
    assert any("control" in t for t in tex), tex   # MathJax ran
    assert not [t for t in tex if re.search(r"href|zq|wq|javascript", t)], tex
    assert not re.search(r"<img[^>]*onerror|<script>alert", dom)
    assert "&lt;script&gt;alert(2)&lt;/script&gt;·c" in dom and r"$\href{javascript:x}{y}$·0" in dom

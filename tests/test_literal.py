"""vrs_helpers.literal: any string put through html_text / markdown_text renders (nbconvert's Markdown renderer, the
stdlib HTML parser) to exactly its characters, inside an element MathJax skips, with no element or attribute of
its own; put through plot_text, matplotlib draws it as its characters (as with math parsing switched off)."""

import string
from html.parser import HTMLParser

import matplotlib
import pandas as pd

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from vrs_helpers.literal import NO_MATH_CLASS, html_text, markdown_text, plot_text  # noqa: E402

HOSTILE = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", r"$\href{javascript:x}{y}$", "*a*", "_b_",
           "`c`", "[l](javascript:x)", "&amp;", "|", "a\nb", "a\n\nb", "# h", "- x", "1. y", "> q", "$$x$$",
           r"\(x\)", r"\[x\]", r"\begin{equation}x\end{equation}", r"\ref{x}", "x\\", "\\", "<!-- c -->",
           "]]>", "&#60;b&#62;", "    indented", "\t", "~~s~~", "<https://x.org>", "a  \nb", "x" * 5000]

# text as a data file can hold it: any Unicode character but surrogates, NUL and the C0/C1 controls other than tab,
# line feed and carriage return (an HTML parser replaces or drops those; they are not in names read from a table)
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
               .filter(lambda c: c in "\t\n\r" or not (ord(c) < 32 or 127 <= ord(c) < 160)), max_size=60)
MARKUPISH = st.lists(st.sampled_from(HOSTILE[:-1] + list(string.punctuation) + ["a", " ", "é", "∑"]),
                     max_size=12).map("".join)


class _Parsed(HTMLParser):
    """Elements (tag, attributes) and text of an HTML fragment, each piece of text with the classes of the elements
    it is in."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements, self.text, self.stack = [], [], []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self.stack.append((tag, (dict(attrs).get("class") or "").split()))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        self.text.append((data, {c for _, cs in self.stack for c in cs}))

    def handle_comment(self, data):
        self.elements.append(("<!--", {}))


def _parse(fragment: str) -> _Parsed:
    p = _Parsed()
    p.feed(fragment)
    p.close()
    return p


def _check_rendered(value: str, rendered: str, allowed_tags: set[str]):
    p = _parse(rendered)
    assert {t for t, _ in p.elements} <= allowed_tags, p.elements
    assert all(set(a) <= {"class"} and a.get("class", NO_MATH_CLASS) == NO_MATH_CLASS for _, a in p.elements)
    shown = "".join(t for t, classes in p.text if NO_MATH_CLASS in classes)
    assert shown == value
    assert "".join(t for t, classes in p.text if NO_MATH_CLASS not in classes).strip() == ""


@given(st.one_of(TEXT, MARKUPISH, st.sampled_from(HOSTILE)))
@settings(max_examples=400, deadline=None)
@example("")
def test_html_text_is_the_text_itself(value):
    _check_rendered(value, html_text(value), {"span"})


@pytest.mark.parametrize("template, tags", [
    ("{}", {"p", "span"}), ("**{}**: rest", {"p", "strong", "span"}), ("- {}\n- two", {"ul", "li", "span"}),
    ("*Note*: {}.", {"p", "em", "span"}), ("| a | b |\n|---|---|\n| {} | 2 |", {"table", "thead", "tbody", "tr", "th",
                                                                               "td", "span"}),
])
@given(value=st.one_of(TEXT, MARKUPISH, st.sampled_from(HOSTILE)))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_markdown_text_renders_to_the_text_itself(template, tags, value):
    """Rendered by the renderer of the report's export (nbconvert's markdown2html), the escaped value is one span
    holding exactly the value's characters; the template's own text and elements are all that is outside it."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    rendered = markdown2html_mistune(template.format(markdown_text(value)))
    p = _parse(rendered)
    assert {t for t, _ in p.elements} <= tags, p.elements
    spans = [a for t, a in p.elements if t == "span"]
    assert spans == [{"class": NO_MATH_CLASS}]
    assert "".join(t for t, classes in p.text if NO_MATH_CLASS in classes) == value
    outside = "".join(t for t, classes in p.text if NO_MATH_CLASS not in classes)
    assert outside.split() == template.replace("{}", " ").replace("**", "").replace("*", "").replace(
        "|---", "").replace("|", " ").replace("- ", " ").split()


def test_markdown_heading_keeps_the_text():
    """A heading: nbconvert makes an id and an anchor link from its text (quoted attribute values, URL-encoded)."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    value = '<img src=x onerror=alert(1)> "q" $x$'
    p = _parse(markdown2html_mistune("### " + markdown_text(value)))
    assert [t for t, _ in p.elements] == ["h3", "span", "a"]
    assert all(k in ("id", "class", "href") for _, a in p.elements for k in a)
    assert p.elements[2][1]["href"].startswith("#")
    assert "".join(t for t, c in p.text if NO_MATH_CLASS in c) == value


def _drawn(text_kwargs: dict, ax):
    t = ax.text(0.1, 0.5, **text_kwargs)
    ax.figure.canvas.draw()
    return t.get_window_extent().bounds


@given(st.one_of(TEXT.filter(str.strip), MARKUPISH.filter(str.strip), st.sampled_from(HOSTILE[:-1])))
@settings(max_examples=40, deadline=None)
@example(r"$\href{javascript:x}{y}$")
@example(r"a\$b$c$")
@example("x\\")
@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")
def test_plot_text_draws_the_characters(value):
    """Drawn with plot_text, a label takes the place matplotlib gives the raw string with math parsing off (the same
    glyphs), and drawing never raises (a raw ``$\\href{..}{..}$`` does: mathtext cannot parse it)."""
    fig, ax = plt.subplots(figsize=(4, 2))
    try:
        escaped = _drawn({"s": plot_text(value)}, ax)
        literal = _drawn({"s": value, "parse_math": False}, ax)
        assert escaped == pytest.approx(literal)
    finally:
        plt.close(fig)


def test_raw_math_label_fails_to_draw_control():
    """Control: without plot_text the string of issue 37 cannot be drawn (so the test above can fail)."""
    fig, ax = plt.subplots()
    try:
        ax.set_title(r"$\href{javascript:x}{y}$")
        with pytest.raises(ValueError):
            fig.canvas.draw()
    finally:
        plt.close(fig)


def test_plot_text_keeps_a_leading_underscore_in_the_legend():
    """matplotlib leaves a label starting with "_" out of the legend; a system named "_base" is shown."""
    fig, ax = plt.subplots()
    try:
        ax.plot([0, 1], [0, 1], label=plot_text("_base"))
        ax.plot([0, 1], [1, 0], label="_hidden")   # control: matplotlib's rule
        shown = [t.get_text() for t in ax.legend().get_texts()]
        assert [t.replace("\u200b", "") for t in shown] == ["_base"]
    finally:
        plt.close(fig)


# ------------------------------------------------------------------- every _repr_html_ that shows names from data

REPR_TAGS = {"p", "b", "sub", "span", "div", "code", "table", "thead", "tbody", "tr", "th", "td", "h2", "ul", "li"}
NO_MATH_PARENTS = {"pre", "code", "script", "style", "textarea"}


def _check_repr(fragment: str, names, math: bool = True):
    """No element or attribute from ``names``; each name in the text as it is; with ``math``: no name that holds a
    math delimiter in text that MathJax scans (outside an element of class tex2jax_ignore and outside pre/code)."""
    p = _parse(fragment)
    assert {t for t, _ in p.elements} <= REPR_TAGS, p.elements
    assert {k for _, a in p.elements for k in a} <= {"class", "style", "id", "border"}
    text = "".join(t for t, _ in p.text)
    for n in names:
        assert n in text, n
    if math:
        scanned = _MathScan()
        scanned.feed(fragment)
        risky = [n for n in names if any(m in n for m in ("$", "\\(", "\\[", "\\begin", "\\ref"))]
        assert not any(n in t for t in scanned.scanned for n in risky)


class _MathScan(HTMLParser):
    """The text nodes MathJax 2's tex2jax would scan: outside skipped tags and tex2jax_ignore elements."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.scanned = [], []

    def handle_starttag(self, tag, attrs):
        self.stack.append((tag, NO_MATH_CLASS in (dict(attrs).get("class") or "").split()))

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data):
        if not any(ignored or t in NO_MATH_PARENTS for t, ignored in self.stack):
            self.scanned.append(data)


NAMES = st.one_of(TEXT.filter(str.strip), MARKUPISH.filter(str.strip), st.sampled_from(HOSTILE[:-1]))


@given(NAMES, NAMES)
@settings(max_examples=150, deadline=None)
@example("<script>alert(1)</script>", r"$\href{javascript:x}{y}$")
def test_data_summary_html(system, column):
    from vrs_helpers.evaluate.tables.scores import DataSummary

    info = DataSummary(10, 5, 1, [system], replications={column: 2}, runs_per_system={system: 2},
                       design=f"10 rows: 1 system(s) ({system}), runs by {column}")
    _check_repr(info._repr_html_(), [info.design])


@given(NAMES, NAMES, NAMES)
@settings(max_examples=150, deadline=None)
@example("<img src=x onerror=alert(1)>", "$x$", r"\(y\)")
def test_verdict_box(system, line, caption):
    from vrs_helpers.evaluate.tables.readings import verdict_html

    frame = pd.DataFrame([{"comparison": f"{system} vs B", "reading": "runs", "test": "F", "statistic": 1.5,
                           "df": "1, 3", "p_value": 0.2, "differ": False}])
    _check_repr(verdict_html(frame, [line], caption=caption), [f"{system} vs B", line, caption])


@given(NAMES, NAMES)
@settings(max_examples=150, deadline=None)
@example("<b>item</b>", "$run$")
def test_phi_result_html(item, run):
    from vrs_helpers.book.reliability import PhiResult

    terms = pd.DataFrame({"component": [run], "variance": [0.1], "divisor": [2.0], "contribution": [0.05]})
    r = PhiResult(0.7, "absolute", item, {run: 2.0}, 0.2, 0.05, terms)
    _check_repr(r._repr_html_(), [item], math=False)   # the table is pandas' (escaped; kept from MathJax in a report)
    html_only = r._repr_html_().split("<table")[0]
    _check_repr(html_only, [item])


@given(NAMES)
@settings(max_examples=100, deadline=None)
@example("<script>alert(1)</script>")
def test_invariance_result_html(feature):
    import numpy as np

    from vrs_helpers.book.invariance import InvarianceResult

    r = InvarianceResult(feature, "nominal", "accuracy", 0.8, np.array([0.8, 0.7]), np.array([0.0, 0.1]))
    _check_repr(r._repr_html_().split("<table")[0], [repr(feature)])   # in <code>: MathJax skips it
    _check_repr(r._repr_html_(), [], math=False)

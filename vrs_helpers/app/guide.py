"""The user guide of the report site: ``docs/*.md`` rendered into ``build/html/guide/`` beside the workbook pages
and the API reference (``vrs reproduce``, ``vrs docs``).

- :func:`build_guide` - every page of the guide (and its images, ``docs/figures/``), with a navigation (the order of
  the links in ``docs/index.md``), math typeset offline by the site's MathJax 2.7 (``../mathjax/``), and its links
  checked: a link to a guide page or an anchor that does not exist, to a workbook that does not exist, to an API
  page or anchor that pdoc did not write, or to a file outside the site fails the build (:class:`GuideError`, every
  broken link listed);
- :func:`render_page` - one page: (HTML, the anchors it defines, the links it makes);
- :func:`code_blocks` - the fenced code blocks of a Markdown file, which ``tests/test_docs.py`` executes.

Markdown is rendered with mistune (nbconvert renders the notebooks' Markdown cells with it too, so the guide and
the workbook pages read the same Markdown): tables, ``$...$`` and ``$$...$$`` math, and GitHub's heading anchors
(``## The verdict`` is ``#the-verdict``, so links written for GitHub work on the site). A code block must say what
it is (``python``, ``console``, ``shell`` or ``text``: :data:`FENCES`); anything else fails the build.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import VRSError

GUIDE_DIR = "guide"
FENCES = {"python": "executed by tests/test_docs.py",
          "console": "a transcript: each `$ ` command is run by tests/test_docs.py and its output compared",
          "shell": "commands too slow for a test (make reproduce, benchmarks): each checked against the CLI's "
                   "parser, the Makefile's targets or the script's options by tests/test_docs.py",
          "text": "output quoted from a committed file named in the comment before it, checked against it"}
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
_SOURCE = re.compile(r"<!--\s*from:\s*(?P<path>\S+)\s*-->\s*$")


class GuideError(VRSError):
    """A guide that cannot be built as it is: broken links or anchors, a page outside the navigation, a code block
    of no known kind."""

    exit_code = 1


def slugify(text: str, seen: dict | None = None) -> str:
    """GitHub's anchor of a heading: the text without tags and punctuation (hyphens and underscores kept), lower
    case, spaces as hyphens; a repeated anchor gets ``-1``, ``-2``, ..."""
    plain = html.unescape(re.sub(r"<[^>]+>", "", text)).strip().lower()
    slug = re.sub(r"[^\w\- ]", "", plain, flags=re.UNICODE).replace(" ", "-")
    if seen is None:
        return slug
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


@dataclass
class CodeBlock:
    """A fenced code block: its kind (the fence's info), its text, the line it starts on and, for ``text``, the
    file it quotes (``<!-- from: PATH -->`` on the line before)."""

    kind: str
    body: str
    line: int
    source: str | None = None
    indent: str = ""


def code_blocks(markdown: str) -> list[CodeBlock]:
    """The fenced code blocks of a Markdown text, in order."""
    blocks = []
    for m in _FENCE.finditer(markdown):
        before = markdown[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        src = _SOURCE.search(before)
        blocks.append(CodeBlock(m.group("info").strip(), m.group("body"), markdown.count("\n", 0, m.start()) + 1,
                                src.group("path") if src else None, m.group("indent")))
    return blocks


@dataclass
class Page:
    """A rendered page: its file name (``verdict.html``), title, body HTML, anchors and links."""

    name: str
    title: str
    body: str
    ids: set = field(default_factory=set)
    links: list = field(default_factory=list)
    images: list = field(default_factory=list)   # image sources, relative to the page's folder
    toc: list = field(default_factory=list)   # (level, anchor, text) of the h2/h3 headings


def _markdown(page: Page):
    import mistune

    class Renderer(mistune.HTMLRenderer):
        def __init__(self):
            super().__init__(escape=False)
            self.seen: dict = {}

        def heading(self, text, level, **attrs):
            anchor = slugify(text, self.seen)
            page.ids.add(anchor)
            if level == 1 and not page.title:
                page.title = html.unescape(re.sub(r"<[^>]+>", "", text)).strip()
            if level in (2, 3):
                page.toc.append((level, anchor, text))
            return f"<h{level} id='{anchor}'>{text}<a class='anchor' href='#{anchor}' aria-hidden='true'>#</a>" \
                   f"</h{level}>\n"

        def link(self, text, url, title=None):
            page.links.append(url)
            return super().link(text, _site_url(url), title)

        def codespan(self, text):
            return super().codespan(text.replace("\\|", "|"))   # GitHub's escaped pipe in a table cell

        def image(self, text, url, title=None):
            page.images.append(url)
            return super().image(text, url, title)

        def block_code(self, code, info=None):
            kind = (info or "").strip()
            return (f"<pre class='code {html.escape(kind)}'><code class='language-{html.escape(kind)}'>"
                    f"{html.escape(code)}</code></pre>\n")

    return mistune.create_markdown(renderer=Renderer(), plugins=["table", "math", "strikethrough"])


def _site_url(url: str) -> str:
    """A link as the site has it: ``page.md#x`` -> ``page.html#x`` (external links as they are)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", url) or url.startswith("#"):
        return url
    path, _, anchor = url.partition("#")
    if path.endswith(".md"):
        path = path[:-3] + ".html"
    return path + (f"#{anchor}" if anchor else "")


def render_page(path: str | Path) -> Page:
    """One Markdown page of the guide, rendered (its code blocks must be of a kind in :data:`FENCES`)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    problems = [f"{path.name}, line {b.line}: a code block of kind {b.kind!r}; give one of {', '.join(FENCES)}"
                for b in code_blocks(text) if b.kind not in FENCES]
    problems += [f"{path.name}, line {b.line}: an indented code block; write it at the start of a line"
                 for b in code_blocks(text) if b.indent]
    problems += [f"{path.name}, line {b.line}: a text block without <!-- from: PATH --> before it"
                 for b in code_blocks(text) if b.kind == "text" and not b.source]
    if problems:
        raise GuideError("; ".join(problems))
    page = Page(path.with_suffix(".html").name, "", "")
    page.body = _markdown(page)(text)
    if not page.title:
        raise GuideError(f"{path.name} has no title (a '# ' heading)")
    return page


def guide_sources(folder: str | Path | None = None) -> list[Path]:
    """The guide's Markdown pages: ``folder`` (default :func:`vrs_helpers.resources.guide_dir`)."""
    from ..resources import guide_dir

    return sorted(Path(folder if folder is not None else guide_dir()).glob("*.md"))


_IDS = re.compile(r"""\bid\s*=\s*["']([^"']+)["']""")


def _check_link(url: str, page: Page, pages: dict, site: Path) -> str | None:
    """What is wrong with a link of ``page`` (None when it resolves)."""
    if re.match(r"^(https?|mailto):", url):
        return None
    if re.match(r"^[a-z][a-z0-9+.-]*:", url):
        return f"{url}: a link of scheme {url.split(':')[0]!r}"
    path, _, anchor = _site_url(url).partition("#")
    if not path:
        return None if anchor in page.ids else f"#{anchor}: no such heading on the page"
    if "/" not in path:   # another page of the guide
        target = pages.get(path)
        if target is None:
            return f"{url}: no guide page {path[:-5] + '.md' if path.endswith('.html') else path}"
        return None if not anchor or anchor in target.ids else f"{url}: no heading #{anchor} in {path}"
    if not path.startswith("../") or not path.endswith(".html"):
        return f"{url}: a link outside the site (name files in `code`, link pages of the site)"
    rel = path[3:]
    file = site / rel
    if rel.startswith("api/"):
        if rel == "api/index.html" and not (site / "api").is_dir():
            return None   # the API reference is not built here
        if file.is_file():
            return None if not anchor or anchor in set(_IDS.findall(file.read_text(encoding="utf-8"))) else \
                f"{url}: the API page has no #{anchor}"
        module = Path(__file__).resolve().parent.parent.parent / rel[len("api/"):-len(".html")]
        if (site / "api").is_dir() or not (module.with_suffix(".py").is_file() or module.is_dir()):
            return f"{url}: no such API page"
        return None   # the API reference is not built here: the module exists
    if "/" in rel:
        return f"{url}: a link outside the site (the site's pages are the workbooks, index.html, api/ and guide/)"
    from ..resources import workbooks

    stems = {w.stem for w in workbooks()}
    if rel == "index.html" or rel[:-5] in stems:
        if anchor and file.is_file() and anchor not in set(_IDS.findall(file.read_text(encoding="utf-8"))):
            return f"{url}: {rel} has no #{anchor}"
        return None
    return f"{url}: no workbook {rel[:-5]} (workbooks: {', '.join(sorted(stems))})"


_CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#1f2328;line-height:1.5}
.top{padding:.6em 1.5em;border-bottom:1px solid #d0d7de;background:#f6f8fa}.top a{margin-right:1.5em}
.wrap{display:flex;max-width:1280px;margin:0 auto}
nav.side{flex:0 0 250px;padding:1em 1.2em;border-right:1px solid #d0d7de;font-size:92%}
nav.side ol{padding-left:1.2em}nav.side li{margin:.25em 0}nav.side .here{font-weight:bold}
nav.side ul{padding-left:1em;font-size:92%}
main.vrs-guide{flex:1;min-width:0;padding:1em 2em;max-width:920px}
pre.code{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:.7em;overflow-x:auto;font-size:88%}
pre.console{background:#24292f;color:#f6f8fa}code{font-size:92%}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:90%}td,th{border:1px solid #d0d7de;padding:3px 8px;
vertical-align:top}a.anchor{margin-left:.4em;color:#d0d7de;text-decoration:none;font-size:80%}
"""


def _page_html(page: Page, nav: list[Page], mathjax: str) -> str:
    from .mathjax import MATHJAX_OUTPUT

    e = html.escape
    output = MATHJAX_OUTPUT
    items = []
    for p in nav:
        if p.name == page.name:
            sub = "".join(f"<li><a href='#{a}'>{re.sub(r'<[^>]+>', '', t)}</a></li>"
                          for lvl, a, t in page.toc if lvl == 2)
            items.append(f"<li class='here'><a href='{e(p.name)}'>{e(p.title)}</a><ul>{sub}</ul></li>")
        else:
            items.append(f"<li><a href='{e(p.name)}'>{e(p.title)}</a></li>")
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(page.title)} - vrs-workbooks user guide</title><style>{_CSS}</style>
<script type="text/x-mathjax-config">MathJax.Hub.Config({{tex2jax: {{inlineMath: [['\\\\(', '\\\\)']],
displayMath: [['$$', '$$']], processEscapes: true}}, {output}}});</script>
<script src="{e(mathjax)}"></script></head><body>
<div class="top"><a href="index.html">User guide</a><a href="../index.html">Reproduction report</a>
<a href="../api/index.html">API reference</a></div>
<div class="wrap"><nav class="side"><ol>{''.join(items)}</ol></nav>
<main class="vrs-guide">
{page.body}
</main></div></body></html>
"""


def build_guide(out_dir: str | Path = "build/html/guide", *, source: str | Path | None = None) -> Path:
    """Render the guide (``source``: default ``docs/`` of a checkout, or the installed package's copy) into
    ``out_dir`` (a folder of the site: ``../mathjax``, ``../api`` and the workbook pages are its siblings) and
    return its ``index.html``. Every link is checked first; a broken one (or a page the navigation of
    ``index.md`` does not list, or a code block of no known kind) raises :class:`GuideError` and nothing is
    written."""
    import shutil

    from .mathjax import MATHJAX_CONFIG, MATHJAX_DIR

    files = guide_sources(source)
    if not any(f.name == "index.md" for f in files):
        raise GuideError(f"no index.md among the guide's pages ({', '.join(f.name for f in files) or 'none'})")
    pages = {}
    for f in files:
        page = render_page(f)
        pages[page.name] = page
    out = Path(out_dir)
    site = out.resolve().parent
    problems = [f"{p.name[:-5]}.md: {why}" for p in pages.values() for url in p.links
                if (why := _check_link(url, p, pages, site))]
    folder = files[0].parent
    images = sorted({img for p in pages.values() for img in p.images})
    problems += [f"an image {img}: not a file in {folder.name}/figures/" for img in images
                 if not img.startswith("figures/") or "/../" in img or not (folder / img).is_file()]
    index = pages["index.html"]
    order = ["index.html"] + [u for u in dict.fromkeys(_site_url(link).partition("#")[0] for link in index.links)
                              if u in pages and u != "index.html"]
    problems += [f"{name[:-5]}.md is not linked from index.md (the navigation)" for name in pages
                 if name not in order]
    if problems:
        raise GuideError("the guide has broken links or pages: " + "; ".join(problems))
    nav = [pages[n] for n in order]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    mathjax = f"../{MATHJAX_DIR}/MathJax.js?config={MATHJAX_CONFIG}"
    for page in nav:
        (out / page.name).write_text(_page_html(page, nav, mathjax), encoding="utf-8")
    for img in images:
        (out / img).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / img, out / img)
    return out / "index.html"

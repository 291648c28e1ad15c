#!/usr/bin/env python3
"""Check the report site in a real headless browser, offline.

    python tools/check_site.py [build/html] [--out build/site-check] [--browser chromium]

Loads ``index.html`` and every notebook page of the site in headless Chromium (Debian's ``chromium`` package) with
the network cut off (a proxy that does not exist, every host name unresolvable), and checks:

- no page asks for anything on the internet (Chromium's network log lists no http(s) request from a page);
- the landing page shows its workbook cards with their thumbnail images (the files exist), the scorecard and the
  coverage table, and no unrounded float (more than 8 decimals) in the scorecard;
- on the notebook pages, MathJax typeset the math: every ``$...$`` of the Markdown cells became MathJax output
  (``script[type^=math/tex]`` with its rendered ``span.MathJax``), none is left as raw TeX, no MathJax error; at
  least one page has math;
- the same on the user guide's pages (``guide/*.html``, when the site has a guide): no request to the internet, its
  math typeset, none left raw;
- screenshots of the landing page and of the notebook page with the most math go to ``--out``.

Exit code 0 when everything holds, 1 otherwise (each failure printed), 2 when no browser is found.
Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
OFFLINE = ["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--host-resolver-rules=MAP * ~NOTFOUND"]
QUIET = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps", "--hide-scrollbars",
         "--disable-features=Translate,OptimizationHints,MediaRouter", "--mute-audio"]


def find_browser(name: str | None = None) -> str | None:
    """The Chromium executable: ``name``, $CHROMIUM, or the first of chromium / google-chrome on PATH."""
    for candidate in ([name] if name else []) + [os.environ.get("CHROMIUM", "")] + list(BROWSERS):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def run_browser(browser: str, page: Path, *, screenshot: Path | None = None, budget_ms: int = 20000,
                shot_wait_ms: int = 8000, size: str = "1280,1000") -> tuple[str, list[str]]:
    """(DOM after scripts ran, http(s) URLs the page requested) for ``page`` loaded offline."""
    with tempfile.TemporaryDirectory(prefix="vrs-chromium-") as tmp:
        netlog = Path(tmp) / "net.json"
        args = [browser, *QUIET, *OFFLINE, f"--user-data-dir={tmp}/profile", f"--window-size={size}"]
        url = page.resolve().as_uri()
        # the DOM after every script and timer ran (virtual time: fast), with the network log of the page
        dom = subprocess.run(args + [f"--log-net-log={netlog}", f"--virtual-time-budget={budget_ms}", "--dump-dom",
                                     url], capture_output=True, text=True, timeout=180).stdout
        requested = page_requests(netlog)
        if screenshot is not None:
            # in real time: under virtual time MathJax's web-font check times out before the fonts load, and the
            # picture would show its fallback fonts instead of what a reader sees
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(args + [f"--timeout={shot_wait_ms}", f"--screenshot={screenshot.resolve()}", url],
                           capture_output=True, timeout=180)
        return dom, requested


def page_requests(netlog: Path) -> list[str]:
    """http(s) URLs requested on behalf of a page opened from a file (Chromium's own background requests, e.g.
    update checks, are not the page's and are left out)."""
    if not netlog.is_file():
        return []
    text = netlog.read_text(errors="replace").rstrip().rstrip(",")
    try:
        events = json.loads(text if text.endswith("}") else text + "]}")["events"]
    except (json.JSONDecodeError, KeyError):
        return []
    urls_by_source, from_page = {}, set()
    for e in events:
        p, src = e.get("params") or {}, (e.get("source") or {}).get("id")
        if str(p.get("url", "")).startswith(("http://", "https://")):
            urls_by_source.setdefault(src, p["url"])
        if str(p.get("network_isolation_key", "")).startswith("file://"):
            from_page.add(src)
    return sorted({u for s, u in urls_by_source.items() if s in from_page})


class _Dom(HTMLParser):
    """Collects what the checks need from a dumped DOM."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict]] = []
        self.tex, self.rendered, self.errors, self.imgs, self.ids = 0, 0, 0, [], set()
        self.markdown_text: list[str] = []
        self.scorecard_cells: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "script" and (a.get("type") or "").startswith("math/tex"):
            self.tex += 1
        if "MathJax" in classes or "MathJax_Display" in classes or "MathJax_SVG" in classes:
            self.rendered += 1
        if "MathJax_Error" in classes or "merror" in classes:
            self.errors += 1
        if tag == "img":
            self.imgs.append(a.get("src") or "")
        if tag in ("script", "style"):
            self._skip += 1
        if tag not in ("img", "br", "hr", "meta", "link", "input", "col", "area", "base", "wbr", "source"):
            self.stack.append((tag, a))

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break

    def _inside(self, pred) -> bool:
        return any(pred(t, a) for t, a in self.stack)

    def handle_data(self, data):
        if self._skip:
            return
        if self._inside(lambda t, a: {"jp-RenderedMarkdown", "vrs-guide"} & set((a.get("class") or "").split())) \
                and not self._inside(lambda t, a: t in ("code", "pre")):
            self.markdown_text.append(data)
        if self._inside(lambda t, a: t == "table" and "sc" in (a.get("class") or "").split()) and \
                self._inside(lambda t, a: t == "td" and "num" in (a.get("class") or "").split()):
            self.scorecard_cells.append(data.strip())


def parse(dom: str) -> _Dom:
    d = _Dom()
    d.feed(dom)
    return d


RAW_TEX = re.compile(r"\$[^$\s][^$]*?\$|\\\(|\\\[|\\begin\{")
LONG_FLOAT = re.compile(r"\d\.\d{9,}")


def check_index(dom: str, site: Path) -> list[str]:
    """Failures of the landing page's DOM."""
    d = parse(dom)
    problems = []
    thumbs = [s for s in d.imgs if s and not s.startswith("data:")]
    if not thumbs:
        problems.append("index.html: no thumbnail images in the workbook cards")
    problems += [f"index.html: thumbnail {s} missing" for s in thumbs if not (site / s).is_file()]
    for wanted in ("workbooks", "coverage", "scorecard"):
        if wanted not in d.ids:
            problems.append(f"index.html: no section #{wanted}")
    if not d.scorecard_cells:
        problems.append("index.html: the scorecard has no values")
    long = [c for c in d.scorecard_cells if LONG_FLOAT.search(c)]
    if long:
        problems.append(f"index.html: unrounded values in the scorecard, e.g. {long[:3]}")
    return problems


def check_notebook_page(dom: str, name: str) -> tuple[list[str], int]:
    """(failures, number of typeset formulas) of a notebook page's DOM."""
    d = parse(dom)
    problems = []
    raw = RAW_TEX.findall(" ".join(d.markdown_text))
    if raw:
        problems.append(f"{name}: raw TeX left in the Markdown cells (math not rendered): {raw[:3]}")
    if d.tex and d.rendered < d.tex:
        problems.append(f"{name}: {d.tex} formulas found by MathJax but only {d.rendered} rendered")
    if d.errors:
        problems.append(f"{name}: {d.errors} MathJax errors")
    if re.search(r'<details class="vrs-check-cell" open', dom):
        problems.append(f"{name}: a check cell is open on loading (they are collapsed: issue 53)")
    return problems, d.rendered


def check_site(site: Path, out: Path, browser: str) -> list[str]:
    """Every failure of the site in ``site`` (screenshots written to ``out``)."""
    problems = []
    index = site / "index.html"
    if not index.is_file():
        return [f"{index} does not exist: run `vrs reproduce` first"]
    dom, requested = run_browser(browser, index, screenshot=out / "index.png")
    problems += check_index(dom, site) + [f"index.html requested {u} (must work offline)" for u in requested]
    pages = sorted(p for p in site.glob("*.html") if p.name != "index.html")
    if not pages:
        problems.append(f"no notebook pages in {site}")
    best, best_n = None, 0
    for page in pages:
        dom, requested = run_browser(browser, page)
        found, n = check_notebook_page(dom, page.name)
        problems += found + [f"{page.name} requested {u} (must work offline)" for u in requested]
        print(f"{page.name}: {n} formulas rendered, {len(requested)} internet requests, "
              f"{'ok' if not found and not requested else 'FAILED'}")
        if n > best_n:
            best, best_n = page, n
    if pages and best is None:
        problems.append("no notebook page has rendered math")
    if best is not None:
        run_browser(browser, best, screenshot=out / "notebook.png")
        print(f"screenshots: {out / 'index.png'}, {out / 'notebook.png'} ({best.name})")
    guide = sorted((site / "guide").glob("*.html"))
    guide_math = 0
    for page in guide:
        dom, requested = run_browser(browser, page)
        found, n = check_notebook_page(dom, f"guide/{page.name}")
        guide_math += n
        problems += found + [f"guide/{page.name} requested {u} (must work offline)" for u in requested]
        print(f"guide/{page.name}: {n} formulas rendered, {len(requested)} internet requests, "
              f"{'ok' if not found and not requested else 'FAILED'}")
    if guide and not guide_math:
        problems.append("no page of the guide has rendered math")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", nargs="?", default="build/html", help="the site folder (default build/html)")
    ap.add_argument("--out", default="build/site-check", help="where the screenshots go")
    ap.add_argument("--browser", default=None, help="the Chromium executable (default: chromium on PATH)")
    args = ap.parse_args(argv)
    browser = find_browser(args.browser)
    if browser is None:
        print("error: no Chromium found; install Debian's `chromium` package or pass --browser", file=sys.stderr)
        return 2
    problems = check_site(Path(args.site), Path(args.out), browser)
    for p in problems:
        print(f"FAILED: {p}", file=sys.stderr)
    print("site check: " + ("ok" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

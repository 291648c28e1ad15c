"""Check the report.html of ``vrs analyze LOGDIR`` in headless Chromium at 1,300 px (issue 40):

    python tools/check_logs_report.py REPORT_DIR_OR_HTML [--width 1300] [--browser chromium] [--screenshot out.png]

A copy of the page gets a script that measures, after layout: the page's scroll width against the window's width,
every table's and figure's right edge against the body's content box, whether the verdict box is the first thing
after the title, and the number of figures. It prints the measurements as JSON and exits 1 when the verdict box is
not first, fewer than 2 figures are shown, or anything is wider than the page. Chromium runs offline with a fresh
profile (tools/check_site.run_browser). Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_site import find_browser, run_browser  # noqa: E402

MEASURE = """<script>
window.addEventListener('load', function () {
  var body = document.body, box = body.getBoundingClientRect();
  var cs = getComputedStyle(body), right = box.right - parseFloat(cs.paddingRight);
  var wide = [];
  document.querySelectorAll('table, figure, img, pre').forEach(function (el, i) {
    var r = el.getBoundingClientRect();
    if (r.right > right + 1 || el.scrollWidth > el.clientWidth + 1) {
      wide.push(el.tagName + '#' + i + ' right ' + Math.round(r.right) + ' > ' + Math.round(right));
    }
  });
  var first = document.querySelector('h1') ? document.querySelector('h1').nextElementSibling : null;
  var out = {window: window.innerWidth, scroll_width: document.documentElement.scrollWidth,
             body_right: Math.round(right), too_wide: wide,
             verdict_first: !!(first && first.classList.contains('verdict')),
             figures: document.querySelectorAll('figure img').length,
             tables: document.querySelectorAll('table').length};
  var pre = document.createElement('pre'); pre.id = 'vrs-measure'; pre.textContent = JSON.stringify(out);
  body.appendChild(pre);
});
</script>"""


def measure(page: Path, browser: str, width: int = 1300, screenshot: Path | None = None) -> dict:
    """The measurements of ``page`` (report.html) at ``width`` px."""
    html = page.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="vrs-logs-report-") as tmp:
        copy = Path(tmp) / "report.html"
        copy.write_text(html.replace("</body>", MEASURE + "</body>", 1), encoding="utf-8")
        dom, _ = run_browser(browser, copy, size=f"{width},1000", screenshot=screenshot)
    found = re.search(r'<pre id="vrs-measure">(.*?)</pre>', dom, re.S)
    if not found:
        raise RuntimeError("the page did not report its measurements (did it load?)")
    return json.loads(found.group(1).replace("&quot;", '"').replace("&gt;", ">").replace("&lt;", "<")
                      .replace("&amp;", "&"))


def problems(m: dict) -> list[str]:
    out = []
    if not m["verdict_first"]:
        out.append("the verdict box is not the first thing after the title")
    if m["figures"] < 2:
        out.append(f"{m['figures']} figure(s); at least 2 expected")
    if m["scroll_width"] > m["window"]:
        out.append(f"the page scrolls sideways ({m['scroll_width']} > {m['window']} px)")
    out += [f"wider than the page: {w}" for w in m["too_wide"]]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--width", type=int, default=1300)
    ap.add_argument("--browser", default=None)
    ap.add_argument("--screenshot", default=None)
    a = ap.parse_args(argv)
    page = Path(a.report)
    page = page / "report.html" if page.is_dir() else page
    browser = find_browser(a.browser)
    if browser is None:
        print("error: no Chromium found; install Debian's `chromium` package or pass --browser", file=sys.stderr)
        return 2
    m = measure(page, browser, a.width, Path(a.screenshot) if a.screenshot else None)
    print(json.dumps(m, indent=1))
    bad = problems(m)
    for p in bad:
        print(f"FAIL: {p}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

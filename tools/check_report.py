"""Check a report.html of ``vrs analyze`` (a score table or harness logs) in headless Chromium, as a reader sees it
(issues 40 and 51):

    python tools/check_report.py REPORT_DIR_OR_HTML [--width 1300] [--browser chromium] [--screenshot out.png]

A copy of the page gets a script that measures, after layout: the page's scroll width against the window's width
(the page never scrolls sideways; a wide table or figure scrolls in its own box), every table's and figure's right
edge, the order of what is shown outside the collapsed details (the title, the warnings, the answer, then the
leaderboard and its figure before anything else), and where the answer stands. It prints the measurements as JSON
and exits 1 when the answer is not the first thing after the title and the warnings, when the first figure is not
the leaderboard's, or when anything widens the page. Chromium runs offline with a fresh profile
(tools/check_site.run_browser). Only the standard library is used.
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

# the report in a frame of the width asked for (a window is at least 500 px wide in headless Chromium), measured
# from the page around it after both loaded
FRAME = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0;background:#fff">
<iframe id="f" src="report.html" style="width:WIDTHpx;height:HEIGHTpx;border:0;display:block"></iframe>
<script>
document.getElementById('f').addEventListener('load', function () {
  var win = this.contentWindow, doc = win.document, wide = [];
  var root = doc.querySelector('.vrs') || doc.body;
  var box = root.getBoundingClientRect(), cs = win.getComputedStyle(root);
  var right = box.right - parseFloat(cs.paddingRight);
  // a table or figure wider than the page must sit in its own scroll box (.scroll), never widen the page
  doc.querySelectorAll('table, img, pre').forEach(function (el, i) {
    var r = el.getBoundingClientRect();
    if (r.right > right + 1 && el.closest('.scroll') === null) {
      wide.push(el.tagName + '#' + i + ' right ' + Math.round(r.right) + ' > ' + Math.round(right));
    }
  });
  var order = [];
  root.querySelectorAll('h1, .warn, #vrs-answer, h2, h3, table, img, details').forEach(function (el) {
    if (el.closest('details') && el.tagName !== 'DETAILS') { return; }
    order.push(el.tagName === 'DIV' ? (el.id || el.className) : el.tagName.toLowerCase());
  });
  var answer = doc.getElementById('vrs-answer');
  var out = {window: win.innerWidth, scroll_width: doc.documentElement.scrollWidth, body_right: Math.round(right),
             too_wide: wide, order: order,
             answer_top: answer ? Math.round(answer.getBoundingClientRect().top) : null,
             figures: root.querySelectorAll('img').length, tables: root.querySelectorAll('table').length};
  var pre = document.createElement('pre'); pre.id = 'vrs-measure'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body></html>"""


def measure(page: Path, browser: str, width: int = 1300, screenshot: Path | None = None, height: int = 1000) -> dict:
    """The measurements of ``page`` (report.html) in a frame ``width`` px wide (and ``height`` high, what the
    screenshot shows)."""
    with tempfile.TemporaryDirectory(prefix="vrs-report-check-") as tmp:
        (Path(tmp) / "report.html").write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
        frame = Path(tmp) / "frame.html"
        frame.write_text(FRAME.replace("WIDTH", str(int(width))).replace("HEIGHT", str(int(height))),
                         encoding="utf-8")
        dom, _ = run_browser(browser, frame, size=f"{max(width, 500)},{height}", screenshot=screenshot,
                             extra=["--allow-file-access-from-files"])
    found = re.search(r'<pre id="vrs-measure">(.*?)</pre>', dom, re.S)
    if not found:
        raise RuntimeError("the page did not report its measurements (did it load?)")
    return json.loads(found.group(1).replace("&quot;", '"').replace("&gt;", ">").replace("&lt;", "<")
                      .replace("&amp;", "&"))


def problems(m: dict) -> list[str]:
    out = []
    order = [x for x in m["order"] if x not in ("h1", "warn")]
    if not order or order[0] != "vrs-answer":
        out.append(f"the answer is not the first thing after the title and the warnings: {m['order'][:4]}")
    shown = [x for x in order if x != "details"]
    if "img" in shown and "table" in shown and shown.index("img") < shown.index("table"):
        out.append("a figure comes before the first table (the leaderboard)")
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
    ap.add_argument("--height", type=int, default=1000)
    a = ap.parse_args(argv)
    page = Path(a.report)
    page = page / "report.html" if page.is_dir() else page
    browser = find_browser(a.browser)
    if browser is None:
        print("error: no Chromium found; install Debian's `chromium` package or pass --browser", file=sys.stderr)
        return 2
    m = measure(page, browser, a.width, Path(a.screenshot) if a.screenshot else None, a.height)
    print(json.dumps(m, indent=1))
    bad = problems(m)
    for p in bad:
        print(f"FAIL: {p}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

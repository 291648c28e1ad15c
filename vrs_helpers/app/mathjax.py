"""The MathJax settings every page of the report site shares (the workbook pages of :mod:`.report` and the user
guide of :mod:`.guide`): MathJax 2.7, copied into the site's ``mathjax/`` folder from the ``jupyter-server-mathjax``
package, so that math renders offline."""

MATHJAX_DIR = "mathjax"
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"  # the combined configuration jupyter-server-mathjax ships

# MathJax's output settings of every page of the site: the web font the copied MathJax ships (no image fonts, no
# font from the internet), no status messages
MATHJAX_OUTPUT = """TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  "HTML-CSS": {availableFonts: [], webFont: "STIX-Web", imageFont: null, linebreaks: {automatic: true}},
  displayAlign: "center", messageStyle: "none"
"""

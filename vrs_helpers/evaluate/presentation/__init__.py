"""What a reader gets: the result of an analysis as one object (:class:`~.result.Result`, ``summary.json``), built
from the analyses (:mod:`.build`), and one renderer for it (:func:`~.render.render`: report.html, Jupyter's display,
Markdown, the console), with report.ipynb (:mod:`.notebook`) whose cells re-run the analysis through the public API
and whose stored outputs are the renderer's."""

"""report.ipynb: a notebook whose cells analyse the data again through the public API - the run's options written
in as data - and whose stored outputs are the renderer's, so that opening it shows the report and running it
(``vrs analyze --execute``, or Run All) makes it afresh.

The options reach the code cell as one Python string literal of their JSON (``repr`` of a ``str``: every quote,
backslash and line break of a name escaped), so nothing from the data can become code.
"""

from __future__ import annotations

import json

from .render import render, title

CALLS = {"scores": "AnalysisSpec", "metrics": "AnalysisSpec", "logs": "LogsSpec"}


def analysis_code(result) -> str:
    """The code cell that makes ``result`` again: the spec from its options, analysed."""
    spec = json.dumps(result.data.get("spec") or {}, ensure_ascii=True, sort_keys=True)
    cls = CALLS[result.kind]
    return (f"from vrs_helpers import {cls}, analyze\n\n"
            f"spec = {cls}.from_dict({spec!r})\n"
            "result = analyze(spec)\n"
            "result")


def report_notebook(result, fragment: str | None = None):
    """The notebook of ``result`` (nbformat 4): a Markdown cell saying what it is and the code cell of
    :func:`analysis_code` with the renderer's output stored under it (``fragment``: that output, when it was drawn
    already)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    intro = nbformat.v4.new_markdown_cell(
        f"# {title(result.data)}\n\n"
        "The report `vrs analyze` wrote: the output below the code is its answer, leaderboard and readings. Run the "
        "notebook (Run All) to analyse the data again with the same options; `result` is the analysis "
        "(`result.answer`, `result.leaderboard`, `result.table('pairs')`, `result.fits` for the fitted models).")
    code = nbformat.v4.new_code_cell(analysis_code(result))
    code.execution_count = 1
    code.outputs = [nbformat.v4.new_output("execute_result", data={
        "text/html": render(result, "fragment") if fragment is None else fragment, "text/plain": repr(result)},
        execution_count=1)]
    nb.cells = [intro, code]
    return nb


def write_report_notebook(result, path) -> None:
    import nbformat

    nbformat.write(report_notebook(result), str(path))

"""The README and the user guide (docs/*.md, issue 42) cannot drift from the code: the guide builds with every link
checked (a broken link, anchor, page or code block fails the build), and every code block of the guide and the
README runs here - ``python`` blocks executed page by page, ``console`` transcripts run and their output compared,
``shell`` commands checked against the CLI's parser, the Makefile and the scripts, ``text`` blocks against the file
they quote. The tables the tests regenerate are the guide's: the bad inputs, the type-I error table, the coverage."""

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vrs_helpers.app import cli
from vrs_helpers.app.guide import FENCES, GuideError, build_guide, code_blocks, render_page

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
FILES = [ROOT / "README.md", *PAGES]


def _blocks(kind):
    return [(f, b) for f in FILES for b in code_blocks(f.read_text(encoding="utf-8")) if b.kind == kind]


def _data_dir():
    d = os.environ.get("VRS_DATA_DIR") or str(ROOT.parent / "shared" / "data")
    return d if Path(d).is_dir() else None


@pytest.fixture
def workdir(tmp_path):
    """A fresh folder with the repository's examples, as a user's checkout has them."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    return tmp_path


# ------------------------------------------------------------------------------------------------------- the build

def test_the_guide_builds_with_a_navigation_and_offline_math(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no warnings
        index = build_guide(tmp_path / "guide")
    pages = sorted(p.name for p in (tmp_path / "guide").glob("*.html"))
    assert pages == sorted(p.with_suffix(".html").name for p in PAGES)
    html = (tmp_path / "guide" / "verdict.html").read_text(encoding="utf-8")
    assert "../mathjax/MathJax.js?config=" in html and "\\(\\phi" in html
    assert all(f"href='{p}'" in html for p in pages)   # every page in the navigation
    assert (tmp_path / "guide" / "figures" / "report-12-systems.png").is_file()
    from vrs_helpers.app.report import external_resources

    assert external_resources(index.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("change, message", [
    (("verdict.md", "[Bad\ninput](bad-input.md)", "[Bad input](bad-inputs.md)"), "no guide page bad-inputs.md"),
    (("verdict.md", "(many.md)", "(many.md#no-such-heading)"), "no heading #no-such-heading in many.html"),
    (("harness-logs.md", "(../08_harness_logs.html)", "(../08_no_such_workbook.html)"), "no workbook"),
    (("designs.md", "registry.html)", "no_such_module.html)"), "no such API page"),
    (("planning.md", "(../api/vrs_helpers/evaluate/tables/power.html)", "(../benchmarks/README.md)"),
     "outside the site"),
    (("index.md", "14. [Development](development.md)", "14. Development"), "development.md is not linked"),
    (("many.md", "```python", "```py"), "a code block of kind 'py'"),
    (("verdict.md", "(figures/report-12-systems.png)", "(figures/missing.png)"), "an image figures/missing.png"),
])
def test_a_broken_link_anchor_page_or_block_fails_the_build(tmp_path, change, message):
    src = tmp_path / "docs"
    shutil.copytree(DOCS, src)
    name, old, new = change
    text = (src / name).read_text(encoding="utf-8")
    assert old in text, old
    (src / name).write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(GuideError, match=re.escape(message)):
        build_guide(tmp_path / "site" / "guide", source=src)
    assert not (tmp_path / "site" / "guide").exists()   # nothing written


def test_api_anchors_are_checked_against_the_built_reference(tmp_path):
    api = tmp_path / "api" / "vrs_helpers" / "evaluate"
    (api / "logs").mkdir(parents=True)
    (api / "logs" / "tasks.html").write_text("<div id='adjusted'></div>")
    (api / "precheck.html").write_text("<div></div>")
    src = tmp_path / "docs"
    shutil.copytree(DOCS, src)
    (src / "many.md").write_text((src / "many.md").read_text() + "\n[it](../api/vrs_helpers/evaluate/logs/tasks.html"
                                 "#adjusted), [gone](../api/vrs_helpers/evaluate/logs/tasks.html#adjust_pvalues)\n")
    with pytest.raises(GuideError) as err:
        build_guide(tmp_path / "guide", source=src)
    assert "#adjust_pvalues" in str(err.value) and "#adjusted" not in str(err.value).replace("#adjust_pvalues", "")


def test_readme_is_the_front_door():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert "make reproduce" in readme and "make test" in readme
    for journey in ("## Reproduce the book", "## Analyse your score table", "## Analyse your harness logs"):
        assert journey in readme
    pages = {p.name: render_page(p) for p in PAGES}
    for url in re.findall(r"\]\((docs/[^)\s]+)\)", readme):
        path, _, anchor = url.partition("#")
        if path.endswith(".md"):
            page = pages.get(Path(path).name)
            assert page is not None, url
            assert not anchor or anchor in page.ids, url
        else:
            assert (ROOT / path).is_file(), url


# --------------------------------------------------------------------------------------------- the code blocks

def test_every_code_block_has_a_checked_kind():
    for f in FILES:
        for b in code_blocks(f.read_text(encoding="utf-8")):
            assert b.kind in FENCES, f"{f.name}, line {b.line}: {b.kind!r}"
            assert not b.indent, f"{f.name}, line {b.line}: indented"


@pytest.mark.parametrize("page", [f for f in FILES if any(b.kind == "python" for b in code_blocks(f.read_text()))],
                         ids=lambda f: f.name)
def test_python_blocks_run(page, workdir, monkeypatch):
    blocks = [b for b in code_blocks(page.read_text(encoding="utf-8")) if b.kind == "python"]
    if any("book.data import load" in b.body for b in blocks) and _data_dir() is None:
        pytest.skip("the book's data are not available: set VRS_DATA_DIR")
    if _data_dir():
        monkeypatch.setenv("VRS_DATA_DIR", _data_dir())
    monkeypatch.chdir(workdir)
    namespace = {"__name__": f"docs_{page.stem}"}
    for b in blocks:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            try:
                exec(compile(b.body, f"{page.name}:{b.line}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"{page.name}, line {b.line}: {type(exc).__name__}: {exc}") from exc


def transcripts():
    """(file, line, command, expected output) of every console block."""
    out = []
    for f, b in _blocks("console"):
        command, expected = None, []
        for line in b.body.splitlines():
            if line.startswith("$ "):
                if command is not None:
                    out.append((f.name, b.line, command, expected))
                command, expected = line[2:], []
            else:
                expected.append(line.rstrip())
        if command is not None:
            out.append((f.name, b.line, command, expected))
    return out


def _matches(expected: list[str], actual: str) -> bool:
    """The output equals the expected lines, a line ``...`` standing for any lines (none included)."""
    pattern = "".join(r"(?:[^\n]*\n)*?" if line == "..." else re.escape(line) + r"\n" for line in expected)
    lines = "".join(line.rstrip() + "\n" for line in actual.splitlines())
    return re.fullmatch(pattern, lines) is not None


def _run(command: str, cwd: Path) -> str:
    args = shlex.split(command)
    assert args[0] == "vrs", f"a console block runs vrs commands only: {command}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               COLUMNS="80")
    if _data_dir():
        env["VRS_DATA_DIR"] = _data_dir()
    proc = subprocess.run([sys.executable, "-m", "vrs_helpers.app.cli", *args[1:]], cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    return proc.stdout


def test_console_transcripts_are_what_the_commands_print(workdir):
    cases = transcripts()
    assert cases
    commands = list(dict.fromkeys(c for _, _, c, _ in cases))   # a command quoted twice runs once
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = dict(zip(commands, pool.map(lambda c: _run(c, workdir), commands), strict=True))
    wrong = [f"{name}, line {line}: $ {command}\n--- expected:\n" + "\n".join(expected) + "\n--- got:\n" +
             outputs[command] for name, line, command, expected in cases if not _matches(expected, outputs[command])]
    assert not wrong, "\n\n".join(wrong)


def _shell_commands():
    for f, b in _blocks("shell"):
        for line in b.body.replace("\\\n", " ").splitlines():
            text = line.split(" #", 1)[0].strip()
            if text:
                yield f.name, b.line, text


def test_shell_commands_are_known(monkeypatch):
    import importlib
    import pkgutil

    import vrs_helpers.app as app

    for info in pkgutil.iter_modules(app.__path__):   # every command's function, wherever it is defined
        module = importlib.import_module(f"vrs_helpers.app.{info.name}")
        for name in dir(module):
            if name.startswith(("_cmd_", "cmd_")):
                monkeypatch.setattr(module, name, lambda args: 0)   # parse only
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    checked = 0
    for name, line, text in _shell_commands():
        args = shlex.split(text)
        if args[0] == "flock":
            args = args[2:]
        where = f"{name}, line {line}: {text}"
        if args[0] == "make":
            assert set(args[1:]) <= targets, where
        elif args[0] == "vrs":
            try:
                assert cli.main(args[1:]) == 0, where
            except SystemExit as exc:
                raise AssertionError(f"{where}: the command's parser refuses it ({exc})") from None
        elif args[0] == "python" and args[1].endswith(".py"):
            script = ROOT / args[1]
            assert script.is_file(), where
            source = script.read_text()
            for opt in (a.split("=")[0] for a in args[2:] if a.startswith("--")):
                assert f'"{opt}"' in source, f"{where}: {script.name} has no option {opt}"
        elif args[0] in ("export", "pip", "conda") or args[:2] == ["jupyter", "lab"]:
            pass
        else:
            raise AssertionError(f"{where}: a command the test cannot check")
        checked += 1
    assert checked >= 10


def _output_text(path: Path) -> str:
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    parts = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            parts.append(o.get("text", ""))
            parts += [_as_read(k, v) for k, v in (o.get("data") or {}).items()
                      if k.startswith("text/") and isinstance(v, str)]
    return "\n".join(parts)


def _as_read(mime: str, text: str) -> str:
    """What a reader sees of a Markdown output: names from the data are written there as character references
    inside a span that MathJax skips (vrs_helpers.literal.markdown_text)."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", text)) if mime == "text/markdown" else text


def test_text_blocks_quote_their_file():
    blocks = _blocks("text")
    assert blocks
    for f, b in blocks:
        source = ROOT / b.source
        assert source.is_file(), f"{f.name}, line {b.line}: no {b.source}"
        assert " ".join(b.body.split()) in " ".join(_output_text(source).split()), \
            f"{f.name}, line {b.line}: the block is not in {b.source}'s output"


# ------------------------------------------------------------------------------------------ the generated tables

def _table_rows(text: str, header: str) -> list[list[str]]:
    start = text.index(header)
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_the_bad_input_table_lists_every_case():
    sys.path.insert(0, str(ROOT / "tests" / "app"))
    try:
        from bad_inputs import CASES, READ
    finally:
        sys.path.pop(0)
    rows = _table_rows((DOCS / "bad-input.md").read_text(encoding="utf-8"), "| bad input | exit | message |")
    assert [r[0] for r in rows] == [c[0] for c in CASES] + [r[0] for r in READ]
    assert [r[1] for r in rows[:len(CASES)]] == [str(c[2]) for c in CASES]
    for row, case in zip(rows, CASES, strict=False):
        assert case[3] in row[2], (case[0], row[2])


def test_the_error_rate_table_is_the_benchmarks_output():
    table = (ROOT / "benchmarks" / "results" / "type_one_error.md").read_text(encoding="utf-8").strip()
    assert table in (DOCS / "error-rates.md").read_text(encoding="utf-8")


def test_the_ranking_error_table_is_the_benchmarks_output():
    table = (ROOT / "benchmarks" / "results" / "ranking_error.md").read_text(encoding="utf-8").strip()
    assert table in (DOCS / "error-rates.md").read_text(encoding="utf-8")


def test_the_judge_error_rate_table_is_the_benchmarks_output():
    table = (ROOT / "benchmarks" / "results" / "judge_type_one_error.md").read_text(encoding="utf-8").strip()
    assert table in (DOCS / "judge.md").read_text(encoding="utf-8")


def test_the_coverage_table_is_coverage_csv():
    """The guide's coverage table and its counts are data/book/coverage.csv (the report renders the CSV)."""
    import pandas as pd

    cov = pd.read_csv(ROOT / "data" / "book" / "coverage.csv", keep_default_na=False)
    page = (DOCS / "reproducing.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ((?:Table|Figure|Section)[^|]*?) \| ([^|]+?) \| ([^|]+?) \|", page, flags=re.M)
    assert rows == list(zip(cov["item"], cov["section"].astype(str), cov["status"], strict=True))
    counts = ", ".join(f"{v} {k}" for k, v in cov["status"].value_counts().items())
    assert f"({counts})" in page
    assert "not yet" not in set(cov["status"]), "every item is reproduced or declared"

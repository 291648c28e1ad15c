"""The grid file of ``vrs batch`` read so that a careless one is an error saying what to change (issue 37): plain
YAML values only (``yaml.safe_load``: a ``!!python/...`` tag builds nothing), tab indentation and invalid YAML named
by line, a notebook that is not one, a parameter without values, an ``exclude`` that leaves nothing to run.
:func:`vrs_helpers.app.runner.load_grid` reads grids through it."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from ..errors import VRSError

GRID_FORM = ("A grid is a YAML file: 'notebook: PATH.ipynb', then 'parameters:' with one line per parameter, "
             "indented by spaces, e.g. '  alpha: [0.01, 0.05]'.")
_KINDS = {str: "text", int: "a number", float: "a number", bool: "true/false", list: "a list"}


class GridError(VRSError, ValueError):
    """A grid file ``vrs batch`` cannot run (exit 2); the message names the file, the line where there is one, and
    what to change."""


def read_grid(p: Path) -> dict:
    """The YAML mapping of grid file ``p``, whose ``notebook`` (if given) is text; errors name the line and what to
    change: a missing or unreadable file, a notebook given instead of a grid, tab indentation, a tag that would
    construct a Python object, invalid YAML, YAML that is not a mapping."""
    import yaml

    if p.suffix.lower() == ".ipynb":
        raise GridError(f"{p} is a notebook; `vrs batch` takes a grid file naming one (`vrs run {p}` runs the "
                        f"notebook itself). {GRID_FORM}")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise GridError(f"{p} is not UTF-8 text. {GRID_FORM}") from None
    except OSError as exc:
        raise GridError(f"{p}: the grid file cannot be read ({exc.strerror or exc}). {GRID_FORM}") from None
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        lines = text.splitlines()
        line = mark.line + 1 if mark is not None else None
        where = f"{p}, line {line}" if line else str(p)
        source = lines[line - 1] if line and line <= len(lines) else ""
        if "\t" in source[:len(source) - len(source.lstrip())] or "'\\t'" in str(getattr(exc, "problem", "")):
            raise GridError(f"{where} is indented with a tab; YAML indents with spaces only. Replace the tabs by "
                            "spaces.") from None
        if isinstance(exc, yaml.constructor.ConstructorError):
            tag = re.search(r"tag:yaml\.org,2002:(\S+?)'", str(exc.problem))
            tag = f"the tag !!{tag.group(1)}" if tag else "a tag"
            raise GridError(f"{where}: {tag} is not read (a grid builds no Python objects). A grid holds plain "
                            "values (numbers, text, true/false, lists): remove the tag.") from None
        raise GridError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc}). {GRID_FORM}") from None
    spec = {} if spec is None else spec
    if not isinstance(spec, dict):
        raise GridError(f"{p} holds {_KINDS.get(type(spec), type(spec).__name__)}, not a mapping. {GRID_FORM}")
    if "notebook" in spec and (not isinstance(spec["notebook"], str) or not spec["notebook"].strip()):
        raise GridError(f"{p}: 'notebook' must be the path of a notebook (text), got {spec['notebook']!r}.")
    return spec


def check_grid(p: Path, notebook: Path, parameters: dict, exclude: list) -> None:
    """The rest of a grid that cannot run: ``notebook`` (a file) is not a Jupyter notebook, a parameter has an
    empty list of values, or ``exclude`` leaves out every combination."""
    import nbformat

    try:
        nbformat.read(str(notebook), as_version=4)
    except Exception as exc:   # NotJSONError, JSON that is no notebook, a file that is not text
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:100]
        raise GridError(f"{p}: {notebook} is not a Jupyter notebook ({first}). Name a .ipynb file.") from None
    empty = [k for k, v in parameters.items() if v == []]
    if empty:
        raise GridError(f"{p}: parameter(s) {', '.join(map(repr, empty))} have an empty list of values, so the grid "
                        "has no combination; give at least one value.")
    keys = list(parameters)
    lists = [v if isinstance(v, list) else [v] for v in parameters.values()]
    if not any(not any(all(combo.get(k) == v for k, v in ex.items()) for ex in exclude)
               for combo in (dict(zip(keys, values, strict=True)) for values in itertools.product(*lists))):
        raise GridError(f"{p}: 'exclude' leaves out every combination of the parameters; nothing would run.")

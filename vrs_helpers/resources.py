"""Where the workbooks and the book's printed tables are, in a checkout and in an installed package.

In a checkout the workbooks are ``notebooks/*.ipynb`` and the book's tables ``data/book/*.json`` beside the package.
A wheel ships the same files inside the package (``vrs_helpers/workbooks`` and ``vrs_helpers/book_tables``, mapped in
``pyproject.toml``), read with :mod:`importlib.resources`. The checkout wins when both exist, so an editable install
always runs the notebooks you edit.

- :func:`workbooks_dir`, :func:`book_dir`, :func:`guide_dir` - the folders (the user guide's Markdown pages: ``docs/``
  of a checkout, ``vrs_helpers/guide`` in a wheel);
- :func:`workbooks` - the workbooks in order; :func:`find_workbook` - one by path, file name, stem or number
  (``"03"``, ``"03_krippendorff_paradoxes"``, ``"03_krippendorff_paradoxes.ipynb"``);
- :func:`copy_workbooks` - copies for a seminar participant to open in JupyterLab (``vrs workbooks DIR``).
"""

from __future__ import annotations

import os
import shutil
from importlib import resources as _ilr
from pathlib import Path

from .errors import VRSError

_CHECKOUT = Path(__file__).resolve().parent.parent
WORKBOOK_GLOB = "[0-9][0-9]_*.ipynb"


class ResourceError(VRSError, FileNotFoundError):
    """A workbook or book table that is not in this installation (the message lists what is)."""


def _packaged(name: str) -> Path | None:
    try:
        root = _ilr.files("vrs_helpers").joinpath(name)
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - vrs_helpers is importable (we are in it)
        return None
    path = Path(str(root))
    return path if path.is_dir() else None


def workbooks_dir() -> Path:
    """The folder holding the workbooks: ``notebooks/`` of a checkout, else the installed package's copy."""
    checkout = _CHECKOUT / "notebooks"
    if any(checkout.glob(WORKBOOK_GLOB)):
        return checkout
    packaged = _packaged("workbooks")
    if packaged is not None and any(packaged.glob(WORKBOOK_GLOB)):
        return packaged
    raise ResourceError("The workbooks are neither in a checkout (notebooks/ beside vrs_helpers) nor in the "
                        "installed package (vrs_helpers/workbooks); reinstall vrs-workbooks.")


def book_dir() -> Path:
    """The folder of the book's printed tables: ``data/book/`` of a checkout, else the installed package's copy."""
    checkout = _CHECKOUT / "data" / "book"
    if any(checkout.glob("*.json")):
        return checkout
    packaged = _packaged("book_tables")
    if packaged is not None and any(packaged.glob("*.json")):
        return packaged
    raise ResourceError("The book's tables are neither in a checkout (data/book/ beside vrs_helpers) nor in the "
                        "installed package (vrs_helpers/book_tables); reinstall vrs-workbooks.")


def guide_dir() -> Path:
    """The folder of the user guide's Markdown pages: ``docs/`` of a checkout, else the installed package's copy."""
    checkout = _CHECKOUT / "docs"
    if (checkout / "index.md").is_file():
        return checkout
    packaged = _packaged("guide")
    if packaged is not None and (packaged / "index.md").is_file():
        return packaged
    raise ResourceError("The user guide is neither in a checkout (docs/ beside vrs_helpers) nor in the installed "
                        "package (vrs_helpers/guide); reinstall vrs-workbooks.")


def workbooks(folder: str | os.PathLike | None = None) -> list[Path]:
    """The workbooks (names starting with two digits) of ``folder`` (default :func:`workbooks_dir`), in order."""
    return sorted(Path(folder if folder is not None else workbooks_dir()).glob(WORKBOOK_GLOB))


def find_workbook(name: str | os.PathLike) -> Path:
    """A workbook by path (an existing file is returned as it is), file name, stem or two-digit number."""
    p = Path(name)
    if p.is_file():
        return p
    text = p.name[:-len(".ipynb")] if p.name.endswith(".ipynb") else p.name
    known = workbooks()
    hits = [w for w in known if w.stem == text] or [w for w in known if w.stem.split("_", 1)[0] == text]
    if len(hits) == 1 and p.parent == Path("."):
        return hits[0]
    listing = ", ".join(w.stem for w in known)
    raise ResourceError(f"No notebook at {name!s} and no workbook of that name; the workbooks are: {listing} "
                        "(give a path, a name or a number such as 03).")


def copy_workbooks(dest: str | os.PathLike, force: bool = False) -> list[Path]:
    """Copy every workbook (with its exercises and committed outputs) and the scorecard baseline into ``dest``.

    Existing files are never overwritten unless ``force``: if any would be, nothing is copied and a
    :class:`ResourceError` names them. Returns the written paths.
    """
    out = Path(dest)
    if out.exists() and not out.is_dir():
        raise ResourceError(f"{out} exists and is not a folder; name a folder for the workbooks.")
    src = workbooks_dir()
    files = workbooks(src) + [f for f in [src / "scorecard_baseline.csv"] if f.is_file()]
    clash = [out / f.name for f in files if (out / f.name).exists()]
    if clash and not force:
        raise ResourceError(f"{len(clash)} file(s) already in {out} (e.g. {clash[0].name}); nothing was copied. "
                            "Choose an empty folder, or pass --force to overwrite them.")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for f in files:
        tmp = out / f".{f.name}.partial"
        shutil.copyfile(f, tmp)
        os.replace(tmp, out / f.name)
        written.append(out / f.name)
    return written

"""The files a user hands to ``vrs analyze``, opened the way the user expects (issue 37): compressed text (``.gz``,
``.bz2``, ``.xz``, a ``.zip`` of one file) read as the text it holds, a file that is not UTF-8 text (a Latin-1
export, a spreadsheet, UTF-16) named with the line and byte where it stops being UTF-8 and what to do, and folders
searched through their links to other folders (each real folder once per path: a link back to a folder above is
not followed again, so a link loop ends).

:class:`InputError` (bad input, exit 2) is defined here, the lowest module that raises it;
:mod:`vrs_helpers.evaluate.scores` re-exports it.
"""

from __future__ import annotations

import fnmatch
import io
import os
import stat
from pathlib import Path

from ..errors import VRSError

#: the compressions read as text (what pandas infers from the same suffixes)
COMPRESSED = (".gz", ".bz2", ".xz", ".zip")
#: spreadsheets: not read (no spreadsheet reader is a dependency); the error says to save them as CSV
SPREADSHEETS = (".xlsx", ".xlsm", ".xls", ".ods", ".numbers")
SAVE_AS_CSV = ("Save it as CSV (UTF-8) - in Excel: File > Save As > 'CSV UTF-8 (Comma delimited)'; in LibreOffice: "
               "Save As > Text CSV, character set Unicode (UTF-8) - and give that file.")
MAX_FOLDERS = 200_000   # folders visited under one root before the search stops (links making a maze)


class InputError(VRSError, ValueError):
    """Bad input to ``vrs analyze`` / workbook 07; the message names the column, value or file and what to do."""


def compression(path) -> str | None:
    """The compression of a file by its last suffix (``.gz``, ``.bz2``, ``.xz``, ``.zip``), else None."""
    suffix = Path(path).suffix.lower()
    return suffix if suffix in COMPRESSED else None


def base_suffix(path) -> str:
    """The suffix that says what the file holds, below its compression: ``scores.jsonl.gz`` -> ``.jsonl``."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in COMPRESSED:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def open_binary(path):
    """The bytes a file holds, decompressed (a ``.zip`` must hold one file)."""
    import bz2
    import gzip
    import lzma

    kind = compression(path)
    try:
        if kind == ".gz":
            return gzip.open(path, "rb")
        if kind == ".bz2":
            return bz2.open(path, "rb")
        if kind == ".xz":
            return lzma.open(path, "rb")
        if kind == ".zip":
            import zipfile

            archive = zipfile.ZipFile(path)
            names = [n for n in archive.namelist() if not n.endswith("/")]
            if len(names) != 1:
                archive.close()
                raise InputError(f"{path} is a zip archive of {len(names)} files; a compressed table or log holds "
                                 "one file. Unpack it and give the files (or their folder).")
            return archive.open(names[0])
        return open(path, "rb")
    except (OSError, EOFError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"Could not read {path}: {exc}") from exc
    except Exception as exc:   # zipfile.BadZipFile and the like
        raise InputError(f"Could not read {path}: {exc} (is it really {kind}-compressed?)") from exc


def open_text(path, errors: str = "strict"):
    """A text handle on a file's UTF-8 text, decompressed by its suffix; a byte-order mark at its start (Excel's
    'CSV UTF-8' writes one) is dropped. Decoding errors surface while reading: :func:`not_utf8` turns them into a
    message."""
    if compression(path) is None:
        return open(path, encoding="utf-8-sig", errors=errors)
    return io.TextIOWrapper(open_binary(path), encoding="utf-8-sig", errors=errors)


def read_text(path) -> str:
    """A whole text file (decompressed), or an :class:`InputError` that says what is wrong with it."""
    check_not_spreadsheet(path)
    try:
        with open_text(path) as handle:
            return handle.read()
    except UnicodeDecodeError:
        raise InputError(not_utf8(path)) from None
    except (OSError, EOFError) as exc:
        raise InputError(f"Could not read {path}: {exc}") from exc


def check_text_file(path) -> None:
    """A file to be read as text: not a spreadsheet (:func:`check_not_spreadsheet`), and a ``.zip`` holding one
    file; otherwise an error that says what to do."""
    check_not_spreadsheet(path)
    if compression(path) == ".zip":
        open_binary(path).close()


def check_not_spreadsheet(path) -> None:
    """A spreadsheet (by its suffix, or an Excel file renamed .csv: its first bytes) is an error saying to save it
    as CSV (UTF-8): no spreadsheet reader is a dependency of the package."""
    suffix = base_suffix(path)
    head = b""
    if suffix not in SPREADSHEETS and compression(path) is None:
        try:
            with open(path, "rb") as handle:
                head = handle.read(8)
        except OSError:
            return
    if suffix in SPREADSHEETS or head.startswith((b"PK\x03\x04", b"\xd0\xcf\x11\xe0")):
        what = f"a spreadsheet ({suffix})" if suffix in SPREADSHEETS else "a spreadsheet (Excel's file format)"
        raise InputError(f"{path} is {what}, not a text table; spreadsheets are not read. {SAVE_AS_CSV}")


def not_utf8(path) -> str:
    """Why a file is not UTF-8 text, and what to do: UTF-16 (a byte-order mark), a spreadsheet, or the line and
    byte of the first byte that is not UTF-8 (a Latin-1 / Windows-1252 export). Reads the file line by line."""
    check_not_spreadsheet(path)
    try:
        with open_binary(path) as handle:
            head = handle.read(4)
        if head.startswith((b"\xff\xfe", b"\xfe\xff")):
            return f"{path} is UTF-16 text (Excel's 'Unicode text'), not UTF-8. {SAVE_AS_CSV}"
        with open_binary(path) as handle:
            for number, line in enumerate(handle, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    byte = line[exc.start]
                    latin = bytes([byte]).decode("cp1252", errors="replace")
                    return (f"{path}, line {number}, byte {exc.start + 1} of the line: 0x{byte:02x} is not UTF-8 "
                            f"(in Latin-1 / Windows-1252 it is {latin!r}: the file was probably saved in that "
                            "encoding). Save it as UTF-8 (Excel: 'CSV UTF-8'; LibreOffice: character set Unicode "
                            "(UTF-8)), or convert it: iconv -f cp1252 -t utf-8 OLD > NEW.")
    except (OSError, EOFError) as exc:
        return f"Could not read {path}: {exc}"
    return f"{path} is not UTF-8 text. Save it as UTF-8."


def find_files(root, pattern: str = "*") -> list[Path]:
    """The files under folder ``root`` whose name matches ``pattern`` (a glob on the name: ``samples_*.jsonl``),
    sorted, searching through links to folders as through folders (``Path.rglob`` does not: a run folder that is a
    link would be skipped in silence). A link to a folder above it (a loop) is not followed again; a folder reached
    by two paths is searched on both (its logs read twice are an error naming them, not a silent choice). Paths
    are as reached from ``root`` (the links' names, not their targets)."""
    root = Path(root)
    found: list[Path] = []
    stack = [(root, frozenset())]
    visited = 0
    while stack:
        folder, above = stack.pop()
        try:
            info = os.stat(folder)
        except OSError:
            continue
        key = (info.st_dev, info.st_ino)
        if key in above:   # a link back to a folder above: a loop
            continue
        visited += 1
        if visited > MAX_FOLDERS:
            raise InputError(f"{root} holds more than {MAX_FOLDERS:,} folders (through links to folders?): give "
                             "the folder the logs are in.")
        above = above | {key}
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        subfolders = []
        for entry in entries:
            try:
                mode = os.stat(entry.path).st_mode   # follows links; a broken link is skipped
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                subfolders.append((Path(entry.path), above))
            elif stat.S_ISREG(mode) and fnmatch.fnmatchcase(entry.name, pattern):
                found.append(Path(entry.path))
        stack.extend(reversed(subfolders))
    return sorted(found)

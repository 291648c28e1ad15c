"""The files a user hands to ``vrs analyze``, opened the way the user expects (issue 37): compressed text (``.gz``,
``.bz2``, ``.xz``, a ``.zip`` of one file) read as the text it holds, a file that is not UTF-8 text (a Latin-1
export, a spreadsheet, UTF-16) named with the line and byte where it stops being UTF-8 and what to do, and folders
searched through their links to other folders (each real folder once per path: a link back to a folder above is
not followed again, so a link loop ends).

Hostile or broken files (issue 50):

- **bounded decompression** - a compressed file is read as a stream whose decompressed size is bounded
  (:func:`max_input_bytes`: 1 GiB unless ``VRS_MAX_INPUT_BYTES`` or ``vrs analyze --max-input-bytes`` raises it; a
  file that inflates more than 1000-fold past 64 MiB is refused as well), and a table or log read whole is first
  streamed through once (:func:`check_inflation`, constant memory): a file that inflates beyond the bound is an
  error saying how to raise it before anything is parsed, and a damaged archive (``LZMAError``, ``zlib.error``, a
  bad CRC, a truncated stream) an error naming the file; a JSON line longer than 1/16 of the bound is refused;
- **files that cannot be read are never skipped in silence** - the search of a folder (:func:`walk`) lists what it
  could not read: dangling links, link loops and chains, named pipes (never opened: reading one would wait
  forever), devices (a link to ``/dev/zero``), folders it may not list; it does not enter special file systems
  (``/proc``, ``/sys``, ``/dev``) or a link to a folder that holds the searched folder itself (``/``), says when it
  enters another file system, and stops after :data:`MAX_FOLDERS` folders or :data:`MAX_WALK_SECONDS` seconds,
  saying what it did not search.

:class:`InputError` (bad input, exit 2) is defined here, the lowest module that raises it;
:mod:`vrs_helpers.evaluate.tables.scores` re-exports it.
"""

from __future__ import annotations

import contextlib
import contextvars
import fnmatch
import io
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import VRSError

#: the compressions read as text (what pandas infers from the same suffixes)
COMPRESSED = (".gz", ".bz2", ".xz", ".zip")
#: spreadsheets: not read (no spreadsheet reader is a dependency); the error says to save them as CSV
SPREADSHEETS = (".xlsx", ".xlsm", ".xls", ".ods", ".numbers")
SAVE_AS_CSV = ("Save it as CSV (UTF-8) - in Excel: File > Save As > 'CSV UTF-8 (Comma delimited)'; in LibreOffice: "
               "Save As > Text CSV, character set Unicode (UTF-8) - and give that file.")
MAX_FOLDERS = 200_000   # folders visited under one root before the search stops (links making a maze)
MAX_WALK_SECONDS = 20.0   # seconds one search of a folder may take before it stops (a link into a huge tree)
ENV_MAX_INPUT_BYTES = "VRS_MAX_INPUT_BYTES"
MAX_INPUT_BYTES = 1 << 30   # the default bound on a compressed file's decompressed size: 1 GiB
MAX_RATIO, RATIO_FLOOR = 1000, 64 << 20   # more than 1000-fold past 64 MiB: a decompression bomb, whatever the bound
RAISE_IT = "raise the bound with --max-input-bytes SIZE (or the environment variable VRS_MAX_INPUT_BYTES=SIZE)"


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


def parse_size(text) -> int:
    """A size in bytes from ``1073741824``, ``1e9``, ``500M``, ``2G``, ``1.5GiB`` or ``4GB`` (K, M, G, T: powers of
    1024); an :class:`InputError` saying the form otherwise."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if match is None or float(match.group(1)) <= 0:
        raise InputError(f"a size must be a positive number of bytes, optionally with K, M, G or T (e.g. 2G, 500M), "
                         f"got {text!r}.")
    return int(float(match.group(1)) * 1024 ** " KMGT".index(match.group(2).upper() or " "))


def format_size(n: int) -> str:
    """``n`` bytes as text: ``1 GiB``, ``512 MiB``, ``1.5 GiB``."""
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if n >= 1024 ** power:
            return f"{n / 1024 ** power:.3g} {unit}"
    return f"{n} bytes"


def max_input_bytes() -> int:
    """The bound on the decompressed size of an input file: ``VRS_MAX_INPUT_BYTES`` (``vrs analyze
    --max-input-bytes`` sets it for its run) or :data:`MAX_INPUT_BYTES` (1 GiB)."""
    text = os.environ.get(ENV_MAX_INPUT_BYTES, "").strip()
    return parse_size(text) if text else MAX_INPUT_BYTES


def _too_big(path, limit: int, ratio: bool = False) -> str:
    why = (f"to more than {MAX_RATIO} times its compressed size" if ratio
           else f"beyond {format_size(limit)} (the bound on a decompressed input file)")
    return (f"{path} inflates {why} when it is decompressed: a file that expands this far is more likely a "
            f"decompression bomb or the wrong file than scores or logs. If it is what you meant, {RAISE_IT} - or "
            "decompress it yourself and give the uncompressed file.")


def _damaged(path, exc: BaseException) -> str:
    kind = compression(path) or "compressed"
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return (f"{path} is not a readable {kind} file ({what}): it is damaged or cut short (an interrupted download or "
            "copy?). Compress it again from the original, or give the uncompressed file.")


def _decompression_errors() -> tuple:
    import lzma
    import zipfile
    import zlib

    return (OSError, EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, ValueError, NotImplementedError)


class _Bounded(io.RawIOBase):
    """A decompressing stream read in full at most to ``limit`` bytes (and refused when it inflates more than
    :data:`MAX_RATIO`-fold past :data:`RATIO_FLOOR`); decompression errors become an :class:`InputError` naming
    the file."""

    def __init__(self, stream, path, limit: int, packed: int, closing=()):
        self._stream, self._path, self._limit, self._packed = stream, path, limit, max(packed, 1)
        self._closing = list(closing)
        self.total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self._stream.read(min(len(buffer), self._limit + 1 - self.total) or 1)
        except InputError:
            raise
        except _decompression_errors() as exc:
            raise InputError(_damaged(self._path, exc)) from None
        n = len(data)
        self.total += n
        if self.total > self._limit:
            raise InputError(_too_big(self._path, self._limit))
        if self.total > RATIO_FLOOR and self.total > MAX_RATIO * self._packed:
            raise InputError(_too_big(self._path, self._limit, ratio=True))
        buffer[:n] = data
        return n

    def close(self) -> None:
        if not self.closed:
            for handle in [self._stream, *self._closing]:
                with contextlib.suppress(Exception):
                    handle.close()
        super().close()


def open_binary(path, limit: int | None = None):
    """The bytes a file holds, decompressed (a ``.zip`` must hold one file). A compressed file is a stream whose
    decompressed size is bounded by ``limit`` (default :func:`max_input_bytes`): reading past it, or a damaged
    stream, raises an :class:`InputError` that says what to do."""
    import bz2
    import gzip
    import lzma

    kind = compression(path)
    limit = max_input_bytes() if limit is None else limit
    try:
        packed = os.path.getsize(path)
        if kind == ".gz":
            return io.BufferedReader(_Bounded(gzip.open(path, "rb"), path, limit, packed))
        if kind == ".bz2":
            return io.BufferedReader(_Bounded(bz2.open(path, "rb"), path, limit, packed))
        if kind == ".xz":
            return io.BufferedReader(_Bounded(lzma.open(path, "rb"), path, limit, packed))
        if kind == ".zip":
            import zipfile

            archive = zipfile.ZipFile(path)
            infos = [i for i in archive.infolist() if not i.filename.endswith("/")]
            if len(infos) != 1:
                archive.close()
                raise InputError(f"{path} is a zip archive of {len(infos)} files; a compressed table or log holds "
                                 "one file. Unpack it and give the files (or their folder).")
            info = infos[0]
            # the archive's own record of the size bounds what zipfile reads (a member that inflates further
            # fails its check): refused at once
            if info.file_size > limit or (info.file_size > RATIO_FLOOR
                                          and info.file_size > MAX_RATIO * max(info.compress_size, 1)):
                archive.close()
                raise InputError(_too_big(path, limit, ratio=info.file_size <= limit))
            return io.BufferedReader(_Bounded(archive.open(info), path, limit, info.compress_size, [archive]))
        return open(path, "rb")
    except InputError:
        raise
    except (OSError, EOFError) as exc:
        raise InputError(f"Could not read {path}: {exc}") from exc
    except Exception as exc:   # zipfile.BadZipFile and the like
        raise InputError(_damaged(path, exc)) from exc


def check_archive_members(path, limit: int | None = None) -> None:
    """A zip archive read by another library (an Inspect ``.eval`` log): the sizes its members record, together,
    within the bound (:func:`max_input_bytes`) and not :data:`MAX_RATIO`-fold their compressed size past
    :data:`RATIO_FLOOR`; a file that is no zip archive is left to the library's own error."""
    import zipfile

    limit = max_input_bytes() if limit is None else limit
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return
    total, packed = sum(i.file_size for i in infos), sum(i.compress_size for i in infos)
    if total > limit or (total > RATIO_FLOOR and total > MAX_RATIO * max(packed, 1)):
        raise InputError(_too_big(path, limit, ratio=total <= limit))


def check_inflation(path, limit: int | None = None) -> None:
    """Before a compressed file is read whole (a table, a log): stream it through once, in constant memory, so that
    one that inflates beyond the bound (:func:`max_input_bytes`) or is damaged is an :class:`InputError` before
    anything is parsed. Uncompressed files pass at once."""
    if compression(path) is None:
        return
    with open_binary(path, limit) as handle:
        while handle.read(1 << 20):
            pass


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
    check_inflation(path)
    try:
        with open_text(path) as handle:
            return handle.read()
    except UnicodeDecodeError:
        raise InputError(not_utf8(path)) from None
    except (OSError, EOFError) as exc:
        raise InputError(f"Could not read {path}: {exc}") from exc


def check_text_file(path) -> None:
    """A file to be read as text: not a spreadsheet (:func:`check_not_spreadsheet`), a ``.zip`` holding one file,
    no NUL bytes at its start (binary data), and a compressed file that inflates within the bound and is not damaged
    (:func:`check_inflation`); otherwise an error that says what to do."""
    check_not_spreadsheet(path)
    try:
        with open_binary(path) as handle:
            head = handle.read(1 << 16)
    except (OSError, EOFError):
        return   # the read says why
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(not_utf8(path))
    if b"\x00" in head:
        at = head.index(b"\x00")
        where = f"byte {at + 1}" + (" of its decompressed text" if compression(path) else "")
        raise InputError(f"{path} holds binary data (a NUL byte at {where}), not a text table. Give the "
                         "CSV/TSV/JSON-lines file itself (UTF-8 text), or a Parquet file.")
    check_inflation(path)


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


#: file systems that hold no logs: the kernel's views of processes, devices and settings
SPECIAL_FILE_SYSTEMS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "debugfs", "tracefs", "securityfs", "cgroup",
                                  "cgroup2", "pstore", "bpf", "configfs", "fusectl", "mqueue", "hugetlbfs",
                                  "binfmt_misc", "efivarfs", "rpc_pipefs", "nsfs", "autofs"})
_SPECIAL_PATHS = ("/proc", "/sys", "/dev")


@dataclass
class Walk:
    """What a search of a folder found (:func:`walk`): the regular ``files`` (paths as reached from the root: the
    links' names), what it ``skipped`` and why (``(path, reason)``: files and folders that could not be read, folders
    not searched) - the logs it may lack - and ``notes`` (it entered another file system)."""

    root: Path
    files: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def warnings(self) -> list:
        """One line per skipped file or folder, starting with ``WARNING:`` (the console and summary.json show
        them)."""
        return [f"WARNING: skipped {path}: {reason}" for path, reason in self.skipped]


def _mounts() -> dict:
    """Device number -> (file system type, mount point) of the mounted file systems (Linux' mountinfo; else
    empty)."""
    found = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                left, _, right = line.partition(" - ")
                parts, fs = left.split(), right.split()
                if len(parts) >= 5 and fs:
                    major, _, minor = parts[2].partition(":")
                    with contextlib.suppress(ValueError):
                        found[os.makedev(int(major), int(minor))] = (fs[0], parts[4])
    except OSError:
        pass
    return found


def _special(path: Path, info, mounts: dict) -> str | None:
    """Why the folder ``path`` (its ``stat``) is not searched: a special file system, or None."""
    fs = mounts.get(info.st_dev)
    if fs is not None and fs[0] in SPECIAL_FILE_SYSTEMS:
        return f"the special file system {fs[0]} ({fs[1]}) holds no logs: not searched"
    if not mounts:
        real = os.path.realpath(path)
        for special in _SPECIAL_PATHS:
            if real == special or real.startswith(special + os.sep):
                return f"{special} holds no logs: not searched"
    return None


def _unreadable(path: str, exc: OSError) -> str:
    """Why an entry whose ``stat`` failed cannot be read."""
    import errno

    target = None
    with contextlib.suppress(OSError):
        target = os.readlink(path)
    if exc.errno == errno.ELOOP:
        return ("a link that loops, or a chain of more links than the system follows (40): it leads to no file"
                + (f" (it points to {target})" if target else ""))
    if exc.errno == errno.ENOENT and target is not None:
        return f"a link to {target}, which does not exist (not mounted, moved or deleted?)"
    return f"cannot be read ({exc.strerror or exc})"


def _not_a_file(path: str, mode: int) -> str:
    target = None
    with contextlib.suppress(OSError):
        target = os.readlink(path)
    via = f"a link to {target}, " if target else ""
    if stat.S_ISFIFO(mode):
        return f"{via}a named pipe (FIFO), not a file: not opened (reading it could wait forever)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return f"{via}a device, not a file: not read"
    if stat.S_ISSOCK(mode):
        return f"{via}a socket, not a file: not read"
    return f"{via}not a regular file: not read"


_WALKS: contextvars.ContextVar = contextvars.ContextVar("vrs_walks", default=None)


@contextlib.contextmanager
def one_walk():
    """Within the block each folder is searched once: :func:`find_files` of several patterns (the detectors of the
    log formats) and :func:`walk` read the same search (and its time bound counts once)."""
    token = _WALKS.set({}) if _WALKS.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _WALKS.reset(token)


def walk(root, max_folders: int | None = None, max_seconds: float | None = None) -> Walk:
    """Search the folder ``root`` for regular files, through links to folders as through folders (``Path.rglob``
    does not: a run folder that is a link would be skipped in silence). A link to a folder above it (a loop) is not
    followed again; a folder reached by two paths is searched on both (its logs read twice are an error naming them,
    not a silent choice). What cannot be read is listed in ``skipped``, never left out in silence (module
    docstring); the search ends after ``max_folders`` folders or ``max_seconds`` seconds (:data:`MAX_FOLDERS`,
    :data:`MAX_WALK_SECONDS`), saying so. Inside :func:`one_walk` a folder searched before is not searched
    again."""
    root = Path(root)
    cache = _WALKS.get()
    key = (str(root), max_folders, max_seconds)
    if cache is not None and key in cache:
        return cache[key]
    result = _walk(root, MAX_FOLDERS if max_folders is None else max_folders,
                   MAX_WALK_SECONDS if max_seconds is None else max_seconds)
    if cache is not None:
        cache[key] = result
    return result


def _walk(root: Path, max_folders: int, max_seconds: float) -> Walk:
    result = Walk(root)
    mounts = _mounts()
    try:
        top = os.stat(root)
    except OSError:
        return result
    real_root = os.path.realpath(root)
    devices = {top.st_dev}
    stack = [(root, frozenset())]
    visited, started = 0, time.monotonic()
    while stack:
        folder, above = stack.pop()
        try:
            info = os.stat(folder)
        except OSError as exc:
            result.skipped.append((folder, _unreadable(str(folder), exc)))
            continue
        key = (info.st_dev, info.st_ino)
        if key in above:   # a link back to a folder above: a loop, searched once already
            continue
        if folder != root:
            real = os.path.realpath(folder)
            if real_root == real or real_root.startswith(real.rstrip(os.sep) + os.sep):
                result.notes.append(f"not searched: {folder}, a link to {real}, a folder that holds {root} itself "
                                    "(a loop)")
                continue
            why = _special(folder, info, mounts)
            if why is not None:
                result.skipped.append((folder, why))
                continue
            if info.st_dev not in devices:
                devices.add(info.st_dev)
                where = mounts.get(info.st_dev, ("", ""))[1]
                result.notes.append(f"the search of {root} went into {folder}, on another file system"
                                    + (f" (mounted at {where})" if where else "") + " than the folder itself")
        visited += 1
        elapsed = time.monotonic() - started
        if visited > max_folders or elapsed > max_seconds:
            rest = [folder] + [f for f, _ in reversed(stack)]
            shown = ", ".join(str(f) for f in rest[:3]) + (", ..." if len(rest) > 3 else "")
            why = (f"more than {max_folders:,} folders" if visited > max_folders
                   else f"more than {max_seconds:g} s ({visited - 1:,} folders)")
            result.skipped.append((root, f"the search stopped after {why}; {len(rest):,} folder(s) not searched "
                                         f"({shown}). Give the folder the logs are in (links to large folders make "
                                         "the search long)"))
            break
        above = above | {key}
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            result.skipped.append((folder, f"a folder that cannot be listed ({exc.strerror or exc})"))
            continue
        subfolders = []
        for entry in entries:
            try:
                mode = os.stat(entry.path).st_mode   # follows links
            except OSError as exc:
                result.skipped.append((Path(entry.path), _unreadable(entry.path, exc)))
                continue
            if stat.S_ISDIR(mode):
                subfolders.append((Path(entry.path), above))
            elif stat.S_ISREG(mode):
                result.files.append(Path(entry.path))
            else:
                result.skipped.append((Path(entry.path), _not_a_file(entry.path, mode)))
        stack.extend(reversed(subfolders))
    result.files.sort()
    return result


def find_files(root, pattern: str = "*") -> list[Path]:
    """The regular files under folder ``root`` whose name matches ``pattern`` (a glob on the name:
    ``samples_*.jsonl``), sorted (:func:`walk`: links to folders followed, loops ended; what cannot be read is in
    the walk's ``skipped``)."""
    return [p for p in walk(root).files if fnmatch.fnmatchcase(p.name, pattern)]

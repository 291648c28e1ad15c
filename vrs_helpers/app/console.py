"""Everything ``vrs`` prints goes through :func:`say` (issue 50): names, values, file names and the messages that
quote them come from the user's data, and a terminal obeys the control characters in them - ``\\x1b[1A\\x1b[2K``
erases the line above (a verdict), ``\\x1b]0;...\\x07`` sets the window title, a line feed inside a model name
splits a line into two that look like the program's own. Each line is escaped by
:func:`vrs_helpers.literal.console_text` (every C0/C1 control character, line feeds included, as its ``repr``-style
escape), so the only line breaks on the console are those between the lines the program prints.

:class:`ArgumentParser` is argparse's parser whose messages (an invalid choice quotes the value given) are escaped
the same way.
"""

from __future__ import annotations

import argparse
import sys

from ..literal import console_text


def lines_of(*parts) -> list[str]:
    """The lines of ``parts``: each a line (its own line feeds escaped), a list or tuple of lines, or None
    (skipped)."""
    out: list[str] = []
    for part in parts:
        if part is None:
            continue
        if isinstance(part, (list, tuple)):
            out += [console_text(p) for p in part]
        else:
            out.append(console_text(part))
    return out


def say(*parts, err: bool = False, flush: bool = False) -> None:
    """Print ``parts`` (:func:`lines_of`), one line each, to stdout (``err``: stderr), every control character in
    them escaped. Multi-line text the program builds itself (a table) is passed as its lines
    (``*text.splitlines()``)."""
    print("\n".join(lines_of(*parts)), file=sys.stderr if err else sys.stdout, flush=flush)


def error(message, err: bool = True) -> None:
    """An error the user can fix: one line, ``error: MESSAGE``, on stderr."""
    say(f"error: {message}", err=err)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, its usage and error messages escaped (an invalid choice or a bad value is quoted in
    them); help text (the program's own) keeps its layout."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {console_text(message)}\n")

"""The package's error base: every error a user can cause derives from :class:`VRSError`."""

from __future__ import annotations


class VRSError(Exception):
    """An error the user can fix (bad input, a missing file, a parameter out of range); the message says what to do.

    ``exit_code`` is what the ``vrs`` command returns for it (2 for bad input)."""

    exit_code = 2

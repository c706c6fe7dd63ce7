"""Every error class of ltr-bench, in one place, importing nothing of the package.

:class:`BenchError` is the one base: an error the user can fix (a config key, a missing
file, a refused comparison). ``ltr-bench`` (:mod:`bench.cli`) prints its message as one
line, ``ltr-bench <command>: error: <message>``, without a traceback, and exits with status
2. Anything else that escapes a command is a bug and keeps its traceback.

Each subclass also derives from the built-in exception it used to be (``ValueError``,
``RuntimeError``), so ``except ValueError`` in a caller keeps working.

>>> issubclass(ConfigError, BenchError) and issubclass(ConfigError, ValueError)
True
>>> issubclass(ChecksumError, DownloadError)
True
>>> issubclass(FileAccessError, BenchError) and issubclass(FileAccessError, OSError)
True
>>> issubclass(DiskFull, FileAccessError)
True
"""

from __future__ import annotations


class BenchError(Exception):
    """An error the user can fix; the CLI prints it as one line and exits with status 2."""


class UsageError(BenchError):
    """A bad command-line argument or input file; the message names the option or file."""


class ConfigError(BenchError, ValueError):
    """A bad configuration; the message names the file and/or the (dotted) config key."""


class TrainingFailed(BenchError, RuntimeError):
    """A training run could not produce a result; nothing is written to its run directory."""


class TrainingDiverged(TrainingFailed):
    """A non-finite loss, gradient or score; the message names epoch, batch, step and values."""


class LibraryError(TrainingFailed):
    """A training library (LightGBM, XGBoost) refused the data or the parameters."""


class IntegrityError(BenchError, ValueError):
    """A result file whose bytes no longer match the digest written with it (bench.atomic.integrity);
    the message names the file and what to type to rebuild it."""


class CalibrationFailed(BenchError, RuntimeError):
    """A calibration measurement raised (in its child process); the message names the batch,
    the error's last line and where the measurements already taken are kept."""


class FrozenMismatch(BenchError):
    """The frozen baselines do not match the current protocol, data or their own checksums."""


# ----------------------------------------------------------------------------- data


class DownloadError(BenchError, RuntimeError):
    """A download that failed or did not verify; the message says what to do."""


class ChecksumError(DownloadError):
    """A complete file whose size or checksum is wrong; it was moved to ``*.corrupt``."""


class TransferInterrupted(DownloadError):
    """The transfer broke off; the ``.part`` file is kept for a resume."""


class HostUnreachable(DownloadError):
    """No answer from the download host (its name does not resolve, the connection is refused,
    or it stays silent past the timeout): no byte arrived; the message names ``--url`` and the
    exact path for an archive placed by hand."""


class ManualDownloadRequired(DownloadError):
    """A manual-only archive is missing; the message names the file, place and source."""


class FileAccessError(BenchError, OSError):
    """A file or folder a command reads or writes that the system refuses: permission denied,
    a folder where a file belongs (or the reverse), a name too long, no space left.

    The message names the path and what to do. Still an ``OSError``, so a caller's ``except
    OSError`` keeps working; a raw ``OSError`` reaching the CLI is a bug and keeps its traceback.
    """


class DiskFull(FileAccessError):
    """No space left on the filesystem a command writes to (or no free inodes, or a used-up quota).

    The message names the file, the space needed when it is known before writing, and the space
    free (:mod:`bench.atomic.space`); ``.path``, ``.needed`` and ``.free`` (bytes, None when unknown)
    say the same to a caller.
    """

    def __init__(self, message: str, *, path, needed: int | None = None, free: int | None = None):
        super().__init__(message)
        self.path, self.needed, self.free = path, needed, free


class ExtractError(BenchError, RuntimeError):
    """An archive that cannot or must not be extracted; the message names the member."""


class SvmlightFormatError(BenchError, ValueError):
    """Malformed SVMlight input; ``.path`` is the file, ``.line`` the 1-based line (or None)."""

    def __init__(self, path, line: int | None, what: str):
        self.path = str(path)
        self.line = line
        self.what = what
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {what}")

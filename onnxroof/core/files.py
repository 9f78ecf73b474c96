"""Writing results to files: atomically, so that a failure never leaves a partial file."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from onnxroof.core.errors import OnnxroofError


def write_atomically(path: Path, content: str | bytes | Iterable[str]) -> None:
    """Write ``content`` (text as UTF-8, bytes, or text in pieces written as they come) to ``path`` so that a
    failure never leaves a partial file (a piece that fails to be made included).

    A regular file (new or existing) is written through a temporary file in the same folder and renamed
    over the target; a new file gets the usual umask permissions, an existing one keeps its mode. Anything
    that is not a regular file (``/dev/null``, a FIFO, ``/dev/stdout``) is written directly: renaming over
    it would replace the device itself.
    """
    path = path.expanduser()
    if path.is_dir():
        raise OnnxroofError(f"{path}: is a folder; give a file name to write to")
    if path.exists() and not path.is_file():
        try:
            with open(path, "wb") as out:
                _write(out, content)
        except OSError as exc:  # /dev/full: the environment's fault, one line, exit 2
            raise OnnxroofError(f"{path}: cannot write: {exc.strerror or exc}") from None
        return
    if not path.parent.exists():
        raise OnnxroofError(f"{path}: folder '{path.parent}' does not exist")
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o666 & ~_umask()
    try:
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OnnxroofError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle, "wb") as out:
            _write(out, content)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):  # a full disk, a read-only folder: the environment's fault, exit 2
            raise OnnxroofError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise


def _write(out: BinaryIO, content: str | bytes | Iterable[str]) -> None:
    if isinstance(content, bytes):
        out.write(content)
    elif isinstance(content, str):
        out.write(content.encode("utf-8"))
    else:
        for piece in content:
            out.write(piece.encode("utf-8"))


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current

"""Input files (network YAML, text and Chakra traces, timing files, workloads): checked before
they are read, so that a bad path is one line naming it, never a hang or a traceback.

:func:`input_problem` says what is wrong with a path (``None``: nothing): no such file, a
folder, not a regular file (a FIFO would block the read forever, ``/dev/zero`` never ends), or
larger than the reader takes. :func:`read_input` reads a checked file as bytes and
:func:`decode_text` turns them into text (UTF-8, an optional byte-order mark dropped), naming
the line of a byte that is not UTF-8. Every reader words its own message around the problem
(``network file 'x.yml': is a folder``).
"""

from __future__ import annotations

import os
import stat

__all__ = ["MAX_INPUT_BYTES", "input_problem", "read_input", "decode_text", "display_name"]

#: largest input file read (the largest real inputs are traces of a few MB)
MAX_INPUT_BYTES = 64 * 2**20

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def input_problem(path, max_bytes: int = MAX_INPUT_BYTES) -> str | None:
    """Why ``path`` cannot be read as an input file (``None``: it can)."""
    try:
        text = os.fspath(path)
    except TypeError:
        return f"is not a file name ({type(path).__name__})"
    if not str(text).strip():
        return "empty file name"
    try:
        st = os.stat(text)
    except FileNotFoundError:
        return "no such file"
    except NotADirectoryError:
        return "no such file (a part of the path is a file, not a folder)"
    except PermissionError:
        return "permission denied"
    except ValueError:  # a NUL in the name
        return "not a valid file name"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if stat.S_ISDIR(st.st_mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "a special file")
        return f"is not a regular file ({kind})"
    if st.st_size > max_bytes:
        return f"is too large ({st.st_size:,} bytes; at most {max_bytes:,})"
    if not os.access(text, os.R_OK):
        return "permission denied"
    return None


def read_input(path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of input file ``path``; ``ValueError`` ``"{what} 'path': problem"``."""
    problem = input_problem(path, max_bytes)
    if problem is None:
        try:
            with open(path, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except OSError as exc:
            problem = exc.strerror or type(exc).__name__
        else:
            if len(data) <= max_bytes:
                return data
            problem = f"is too large (more than {max_bytes:,} bytes)"
    raise ValueError(f"{what} {os.fspath(path)!r}: {problem}")


def decode_text(data: bytes, name: str) -> str:
    """UTF-8 text of ``data`` (a leading byte-order mark dropped); ``ValueError`` naming ``name``
    and the line of the first byte that is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ValueError(f"{name}: line {line}: not UTF-8 text (byte {exc.start})") from None
    return text[1:] if text.startswith("\ufeff") else text


def display_name(path) -> str:
    """``path`` as text for a one-line message: as is when printable, else quoted with escapes
    (a newline in a file name must not cut the message)."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else str(path)
    return text if text.isprintable() else repr(text)

"""Output files (``-o``, ``--plot``, timing files): checked before any work, written atomically.

Two halves, used together by every command that writes a file:

* :func:`check_output_path` -- call it *before* any work starts. It refuses, with one
  ``ValueError`` line naming the option and the path: an empty name, a name ending in ``/`` or
  naming an existing folder, an existing special file (``/dev/full``, ``/dev/null``, a pipe or a
  socket: the write replaces the file, so it must be a regular one), a read-only file, a path
  under a regular file (``notes.txt/out.json``), a folder nobody can create files in
  (``/proc/...``, a read-only mount, no permission; checked by creating and removing a probe
  file there), a file name longer than the file system allows, and (``suffixes``) a file type
  the writer cannot produce. It never opens or reads the target.
* :func:`write_atomic` / :func:`atomic_output` -- write into a temporary file in the same folder
  (``.NAME.XXXXXX.tmp``), ``fsync`` it, then ``os.replace`` it onto the target: readers see the
  old file or the new one, never half of one. On any error (or Ctrl-C) the temporary file is
  removed and the target is left as it was. A symlink as target is followed (the file it points
  to is replaced, the link stays). A new file gets the usual permissions (0666 less the umask),
  a replaced one keeps its own.

**Missing parent folders are created** (``-o build/verilog/x.v`` in a fresh checkout works), at
write time, once the work is done: the check only makes sure the nearest existing ancestor is a
folder new entries can be created in, so nothing is left behind when the work fails.

A process killed with SIGKILL during the final write can leave a ``.NAME.*.tmp`` file beside the
target (never a half-written target); it is safe to delete.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

__all__ = ["check_output_path", "write_atomic", "atomic_output", "TEMP_SUFFIX"]

#: every temporary file this module creates ends with this (tests look for leftovers by it)
TEMP_SUFFIX = ".tmp"

_NAME_MAX_DEFAULT = 255


def _fail(option, text, why):
    raise ValueError(f"{option} {text!r}: {why}")


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return _NAME_MAX_DEFAULT


def _probe(folder: Path) -> str | None:
    """None when a file can be created (and removed) in ``folder``, else the reason."""
    import tempfile

    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".fred-probe.", suffix=TEMP_SUFFIX)
    except OSError as exc:
        if exc.errno == errno.ENOENT:  # procfs and the like: the folder exists, takes no files
            return "this file system takes no new files there"
        return exc.strerror or type(exc).__name__
    os.close(fd)
    try:
        os.unlink(name)
    except OSError:
        pass
    return None


def check_output_path(option: str, path, *, suffixes=None) -> Path:
    """Check that ``path`` can be written as the output of ``option``; return it as a Path.

    ``option`` is what the user typed it as (``"--output"``, ``"--plot"``); ``suffixes`` (e.g.
    ``(".png", ".pdf")``) restricts the file type. Raises ``TypeError`` when ``path`` is not a
    string or path, ``ValueError`` (one line naming the option and the path) for every refusal
    listed in the module docstring. Creates nothing but a probe file, which it removes.
    """
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{option} must be a file name, not {type(path).__name__} {path!r}")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"{option} must be a file name, not {type(text).__name__} {text!r}")
    if not text.strip():
        _fail(option, text, "empty file name")
    if "\0" in text:
        _fail(option, text, "file name contains a NUL character")
    if text.endswith(("/", os.sep)) or Path(text).name in ("", ".", ".."):
        _fail(option, text, "names a folder, not a file")
    real = Path(os.path.realpath(text))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        st = None  # a parent is a regular file: reported below, naming it
    except OSError as exc:
        _fail(option, text, "file name too long" if exc.errno == errno.ENAMETOOLONG
              else f"cannot reach it: {exc.strerror}")
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            _fail(option, text, "is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            _fail(option, text, "is not a regular file (a device, pipe or socket cannot be "
                                "replaced by an output file)")
        if not st.st_mode & 0o222 or not os.access(real, os.W_OK):
            _fail(option, text, "is read-only")
    # the nearest existing ancestor must be a folder in which entries can be created
    folder = real.parent
    while True:
        try:
            fst = os.stat(folder)
            break
        except FileNotFoundError:
            folder = folder.parent
        except NotADirectoryError:
            folder = folder.parent
        except OSError as exc:
            _fail(option, text, f"cannot reach folder {str(folder)!r}: {exc.strerror}")
    if not stat.S_ISDIR(fst.st_mode):
        _fail(option, text, f"{str(folder)!r} is a file, not a folder")
    if len(os.fsencode(real.name)) > _name_max(folder):
        _fail(option, text, "file name too long")
    why = _probe(folder)
    if why is not None:
        _fail(option, text, f"cannot create files in folder {str(folder)!r}: {why}")
    if suffixes is not None:
        suffix = Path(text).suffix.lower()
        if suffix not in suffixes:
            _fail(option, text, f"{'file type ' + repr(suffix) if suffix else 'no file type'}"
                                f" (use one of {', '.join(suffixes)})")
    return Path(text)


def _new_file_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_output(path):
    """Context manager yielding a temporary path to write instead of ``path``.

    On normal exit the temporary file is synced and renamed onto ``path`` (symlinks followed,
    missing parent folders created); on any exception it is removed and ``path`` is untouched.
    The temporary name keeps ``path``'s suffix, so tools that pick a format from the name
    (matplotlib's ``savefig``) still work; pass the format explicitly all the same.
    """
    import tempfile

    target = Path(os.path.realpath(os.fspath(path)))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = _new_file_mode()
    room = max(1, _name_max(target.parent) - 20 - len(target.suffix))
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem[:room]}.",
                               suffix=TEMP_SUFFIX + target.suffix)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(target.parent)


def write_atomic(path, data) -> Path:
    """Write ``data`` (``str``, UTF-8 encoded, or ``bytes``) to ``path`` atomically; return
    ``Path(path)``. Never reads the existing file. See :func:`atomic_output`."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"write_atomic writes str or bytes, not {type(data).__name__}")
    with atomic_output(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
    return Path(path)

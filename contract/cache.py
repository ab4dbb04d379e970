"""The build cache: where Verilator builds and yosys area runs live, and how an entry is made so
that a build killed at any moment (SIGKILL, power button, Ctrl-C) cannot poison a later run.

**Location** (:func:`cache_root`): ``$FRED_BUILD`` when set, else ``$XDG_CACHE_HOME/fred``, else
``~/.cache/fred``; never inside the source tree, so an installed ``fred`` works from any folder
and every checkout of one machine shares the compiler cache. Inside it:

* ``sim/``    -- Verilator builds, one folder per Verilog text and toolchain (``fred.sim.toolchain``);
  the cocotb runs of a build go in ``run-*`` folders inside it;
* ``area/``   -- yosys area runs, one folder per Verilog text and script (``fred.hdl.physical.area``);
* ``ccache/`` -- the C++ compiler cache of the Verilator builds.

Deleting the whole folder at any time no ``fred`` process runs is safe (everything is rebuilt).

**Entries** (:func:`cached_entry`): an entry is built in a temporary folder beside it
(``.tmp-NAME@HOST@PID@RANDOM``), a completion marker (``.complete``, JSON) is written last, and
the folder is renamed onto its final name in one ``rename``. So a final folder either does not
exist or is complete; a folder without the marker (a killed build of an older layout, or a
damaged one) is moved aside and rebuilt, and so is one whose marker lists a file that is gone.
Builders of the same entry (pytest-xdist workers, two shells) take a lock file
(``.locks/NAME.lock``, ``flock``, released by the kernel when a holder dies) so the work is done
once; correctness does not depend on it: when two renames race, the loser finds the winner's
complete entry, discards its own copy and uses the winner's. Temporary folders of dead builders
on this host are removed by the next build in the same folder.

A killed build leaves at worst a temporary folder (removed later) and never a half entry. The
files of an entry are not ``fsync``-ed one by one (a Verilator build has hundreds); a machine
that loses power during a build may need the cache deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from pathlib import Path

from .outputs import write_atomic

__all__ = ["cache_root", "cached_entry", "entry_complete", "discard_entry", "MARKER"]

#: name of the completion marker, written last inside an entry
MARKER = ".complete"
_SEP = "@"


def cache_root() -> Path:
    """The build cache folder (not created): ``$FRED_BUILD``, ``$XDG_CACHE_HOME/fred`` or
    ``~/.cache/fred`` (a per-user folder in the temporary folder when there is no home)."""
    env = os.environ.get("FRED_BUILD", "").strip()
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and os.path.isabs(xdg):  # the XDG spec ignores relative values
        return Path(xdg) / "fred"
    try:
        return Path.home() / ".cache" / "fred"
    except RuntimeError:  # no HOME and no password entry
        import tempfile

        return Path(tempfile.gettempdir()) / f"fred-cache-{os.getuid()}"


def _check_name(name: str) -> str:
    if not name or name.startswith(".") or "/" in name or os.sep in name or _SEP in name:
        raise ValueError(f"cache entry name {name!r} must be a plain file name without "
                         f"'{_SEP}' that does not start with '.'")
    return name


def entry_complete(path) -> bool:
    """True when ``path`` is a complete entry: its marker parses and names every file it needs."""
    try:
        info = json.loads((Path(path) / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(info, dict):
        return False
    files = info.get("files", [])
    return isinstance(files, list) and all((Path(path) / str(f)).exists() for f in files)


def _host() -> str:
    return os.uname().nodename.replace(_SEP, "_").replace("/", "_") or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _set_aside(path: Path) -> None:
    """Move ``path`` out of the way in one rename, then delete it."""
    trash = path.parent / f".trash-{path.name}{_SEP}{_host()}{_SEP}{os.getpid()}{_SEP}{os.urandom(4).hex()}"
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def discard_entry(kind: str, name: str) -> None:
    """Remove an entry (e.g. one whose content turned out unreadable) so the next use rebuilds it."""
    _set_aside(cache_root() / kind / _check_name(name))


def _sweep(folder: Path) -> list:
    """Remove temporary and trash folders in ``folder`` left by dead processes of this host;
    return the removed names."""
    host, gone = _host(), []
    for p in folder.iterdir():
        if not p.name.startswith((".tmp-", ".trash-")):
            continue
        parts = p.name.rsplit(_SEP, 3)
        if len(parts) != 4 or parts[1] != host or not parts[2].isdigit():
            continue
        if not _alive(int(parts[2])):
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p.name)
    return gone


@contextlib.contextmanager
def _locked(folder: Path, name: str):
    locks = folder / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cached_entry(kind: str, name: str, build) -> Path:
    """Return the complete cache entry ``cache_root()/kind/name``, building it first if needed.

    ``build(folder)`` fills the (empty, temporary) ``folder`` and returns a dict recorded in the
    marker, or None; a ``"files"`` list in it names files (relative to the entry) that must
    exist for the entry to count as complete. If ``build`` raises, the temporary folder is
    removed and the exception propagates; nothing is published.
    """
    _check_name(name)
    folder = cache_root() / kind
    final = folder / name
    if entry_complete(final):
        return final
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder, name):
        if entry_complete(final):  # another builder finished while we waited
            return final
        if final.exists() or final.is_symlink():
            _set_aside(final)  # incomplete: a killed build of an older layout, or damaged
        _sweep(folder)
        tmp = folder / f".tmp-{name}{_SEP}{_host()}{_SEP}{os.getpid()}{_SEP}{os.urandom(4).hex()}"
        tmp.mkdir()
        t0 = time.time()
        try:
            info = dict(build(tmp) or {})
            info.update(kind=kind, name=name, host=_host(), pid=os.getpid(),
                        created_unix=round(t0, 3), build_s=round(time.time() - t0, 3))
            missing = [f for f in info.get("files", []) if not (tmp / str(f)).exists()]
            if missing:
                raise RuntimeError(f"cache entry {kind}/{name}: the build did not produce "
                                   f"{', '.join(map(str, missing))}")
            write_atomic(tmp / MARKER, json.dumps(info, indent=1, sort_keys=True, default=str) + "\n")
            _publish(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


def cached_json(kind: str, name: str, build, filename: str, load):
    """``load(parsed JSON of filename)`` from the entry ``cached_entry(kind, name, build)``
    makes; an entry whose file is missing or damaged (e.g. edited by hand) is discarded and
    built once more, and a second failure propagates."""
    for attempt in range(2):
        entry = cached_entry(kind, name, build)
        try:
            return load(json.loads((entry / filename).read_text()))
        except (OSError, ValueError, TypeError):
            if attempt:
                raise
            discard_entry(kind, name)


def _publish(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` onto ``final``; when another builder got there first with a complete entry,
    keep theirs and drop ours."""
    for _ in range(2):
        try:
            os.rename(tmp, final)
            return
        except OSError:
            if not (final.exists() or final.is_symlink()):
                raise
            if entry_complete(final):  # lost the race to an equally good entry
                shutil.rmtree(tmp, ignore_errors=True)
                return
            _set_aside(final)
    os.rename(tmp, final)

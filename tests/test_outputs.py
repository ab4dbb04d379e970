"""Output files: every bad path refused before any work (one line naming the option and the path),
every write atomic (temporary file + rename), nothing left half-written (fred.contract.outputs)."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from fred.contract.outputs import atomic_output, check_output_path, write_atomic


def leftovers(folder: Path) -> list:
    """Temporary or probe files a writer left in ``folder`` (recursively)."""
    return sorted(str(p) for p in Path(folder).rglob(".*") if ".tmp" in p.name)


def _bad_paths(tmp_path):
    """(label, path, words of the expected message) for every kind of bad output path."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "file.txt").write_text("x")
    ro = tmp_path / "ro.json"
    ro.write_text("keep")
    ro.chmod(0o444)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()
    cases = [
        ("empty", "", "empty file name"),
        ("blank", "  ", "empty file name"),
        ("folder", str(tmp_path / "dir"), "is a folder"),
        ("slash", str(tmp_path / "new") + "/", "names a folder"),
        ("dot", str(tmp_path) + "/.", "folder"),
        ("under a file", str(tmp_path / "file.txt" / "out.json"), "is a file, not a folder"),
        ("deep under a file", str(tmp_path / "file.txt" / "a" / "b.json"), "is a file, not a folder"),
        ("read-only file", str(ro), "is read-only"),
        ("fifo", str(fifo), "not a regular file"),
        ("socket", str(sock), "not a regular file"),
        ("/dev/full", "/dev/full", "not a regular file"),
        ("/dev/null", "/dev/null", "not a regular file"),
        ("/proc file", "/proc/self/status", "read-only"),
        ("new file in /proc", "/proc/self/fred-out.json", "cannot create files in folder"),
        ("new file in /sys", "/sys/kernel/fred-out.json", "cannot create files in folder"),
        ("name too long", str(tmp_path / ("n" * 300 + ".json")), "file name too long"),
        ("NUL", str(tmp_path / "a\0b"), "NUL"),
    ]
    if os.geteuid() != 0:  # root may create files in a 0555 folder; /proc and /sys cover it then
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        cases.append(("unwritable folder", str(locked / "x.json"), "cannot create files in folder"))
    return cases


def test_bad_paths_refused_in_one_line(tmp_path):
    for label, path, words in _bad_paths(tmp_path):
        if path.startswith(("/proc", "/sys", "/dev")) and not Path(path).parent.exists():
            continue
        with pytest.raises(ValueError) as exc:
            check_output_path("--output", path)
        msg = str(exc.value)
        assert "\n" not in msg, (label, msg)
        assert msg.startswith(f"--output {path!r}: "), (label, msg)
        assert words in msg, (label, msg)
    assert leftovers(tmp_path) == []
    assert (tmp_path / "ro.json").read_text() == "keep"


def test_wrong_types():
    for bad in (3, None, b"x.json", ["a"]):
        with pytest.raises(TypeError, match=r"^--plot must be a file name, not "):
            check_output_path("--plot", bad)


def test_suffixes(tmp_path):
    sfx = (".png", ".pdf")
    assert check_output_path("--plot", tmp_path / "a.PNG", suffixes=sfx) == tmp_path / "a.PNG"
    with pytest.raises(ValueError, match=r"file type '\.txt' \(use one of \.png, \.pdf\)"):
        check_output_path("--plot", str(tmp_path / "a.txt"), suffixes=sfx)
    with pytest.raises(ValueError, match=r"no file type"):
        check_output_path("--plot", str(tmp_path / "a"), suffixes=sfx)
    # a worse problem is named first
    with pytest.raises(ValueError, match="is a folder"):
        check_output_path("--plot", str(tmp_path), suffixes=sfx)


def test_good_paths_create_nothing(tmp_path):
    (tmp_path / "old.json").write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "old.json")
    for p in (tmp_path / "new.json", tmp_path / "old.json", link, tmp_path / "a" / "b" / "c.json",
              tmp_path / "dangling"):
        assert check_output_path("-o", p) == Path(p)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["link.json", "old.json"]


def test_write_atomic_creates_folders_and_sets_modes(tmp_path):
    target = tmp_path / "a" / "b" / "out.json"
    old = os.umask(0o022)
    try:
        assert write_atomic(target, "héllo\n") == target
    finally:
        os.umask(old)
    assert target.read_bytes() == "héllo\n".encode()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    target.chmod(0o600)
    write_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # a replaced file keeps its mode
    with pytest.raises(TypeError):
        write_atomic(target, 3)
    assert target.read_bytes() == b"\x00\x01"
    assert leftovers(tmp_path) == []


def test_write_atomic_follows_a_symlink(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_failed_write_leaves_target_and_no_temp(tmp_path):
    target = tmp_path / "plot.png"
    target.write_text("previous")
    seen = []
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_output(target) as tmp:
            seen.append(tmp)
            assert tmp.parent == tmp_path and tmp.suffix == ".png" and ".tmp" in tmp.name
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert target.read_text() == "previous"
    assert not seen[0].exists() and leftovers(tmp_path) == []
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C too
        with atomic_output(target) as tmp:
            tmp.write_text("half")
            raise KeyboardInterrupt
    assert target.read_text() == "previous" and leftovers(tmp_path) == []


def test_write_atomic_never_opens_the_target(tmp_path):
    """A FIFO as target: opening it would block forever; write_atomic replaces it instead."""
    fifo = tmp_path / "out.v"
    os.mkfifo(fifo)
    t = threading.Thread(target=write_atomic, args=(fifo, "module m; endmodule\n"), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "write_atomic opened the target"
    assert fifo.read_text() == "module m; endmodule\n"


def test_readers_see_old_or_new_never_half(tmp_path):
    """While one thread rewrites a file many times, a reader only ever sees a complete version."""
    target = tmp_path / "t.json"
    a, b = "A" * 200_000, "B" * 300_000
    write_atomic(target, a)
    stop = threading.Event()
    bad = []

    def reader():
        while not stop.is_set():
            text = target.read_text()
            if text not in (a, b):
                bad.append(len(text))

    r = threading.Thread(target=reader)
    r.start()
    for k in range(60):
        write_atomic(target, b if k % 2 == 0 else a)
    stop.set()
    r.join()
    assert bad == []
    assert leftovers(tmp_path) == []


def test_longest_name_still_writes(tmp_path):
    target = tmp_path / ("x" * 250 + ".json")
    check_output_path("-o", target)
    write_atomic(target, "{}")
    assert target.read_text() == "{}" and leftovers(tmp_path) == []

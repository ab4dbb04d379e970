"""Output files: every bad path refused before any work (one line naming the option and the path),
every write atomic (temporary file + rename), nothing left half-written (fred.contract.outputs)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fred.cli import main as fred_main
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


# ---- through the CLI: refused before any work, one line, exit 2, nothing written ----------------

#: command line -> (dotted name of the function that does the work, option checked)
WORK = {
    "verilog": (["verilog", "rd", "--lanes", "1", "--dtype", "int32", "-o"], "fred.hdl.cells.verilog_build",
                "--output"),
    "characterize": (["characterize", "--no-switch", "-o"], "fred.sim.characterize.characterize", "--output"),
    "estimate": (["estimate", "-w", "resnet-152", "-f", "mesh", "--plot"], "fred.model.training.estimate_table",
                 "--plot"),
    "sweep": (["sweep", "-w", "resnet-152", "-f", "mesh", "--plot"], "fred.commands.sweep.sweep", "--plot"),
}


def _no_work(monkeypatch, dotted):
    import importlib

    modname, attr = dotted.rsplit(".", 1)

    def work(*a, **k):
        raise AssertionError("the command started its work before checking its output path")

    monkeypatch.setattr(importlib.import_module(modname), attr, work)


@pytest.mark.parametrize("command", sorted(WORK))
def test_cli_refuses_bad_outputs_before_work(command, tmp_path, monkeypatch, capsys):
    argv, dotted, option = WORK[command]
    _no_work(monkeypatch, dotted)
    n = 0
    for label, path, words in _bad_paths(tmp_path):
        if "\0" in path or (path.startswith(("/proc", "/sys", "/dev")) and not Path(path).parent.exists()):
            continue  # argv cannot carry a NUL
        capsys.readouterr()
        assert fred_main([*argv, path]) == 2, (command, label)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"fred: error: {option} {path!r}: "), (label, err)
        n += 1
    assert n >= 12
    assert leftovers(tmp_path) == []
    assert (tmp_path / "ro.json").read_text() == "keep"


@pytest.mark.parametrize("command", ["estimate", "sweep"])
def test_cli_plot_file_type(command, tmp_path, monkeypatch, capsys):
    argv, dotted, option = WORK[command]
    _no_work(monkeypatch, dotted)
    assert fred_main([*argv, str(tmp_path / "fig.txt")]) == 2
    assert "file type '.txt' (use one of .png, .pdf" in capsys.readouterr().err
    assert fred_main([*argv, str(tmp_path / "fig")]) == 2
    assert "no file type" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_plot_suffixes_are_matplotlib_formats():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from fred.model.plots import PLOT_SUFFIXES

    supported = Figure().canvas.get_supported_filetypes()
    assert {s[1:] for s in PLOT_SUFFIXES} <= set(supported)


def test_cli_subprocess_no_traceback(tmp_path):
    """The installed command: exit 2, one stderr line, no traceback, for a special file."""
    exe = Path(sys.executable).parent / "fred"
    for argv in (["verilog", "rd", "-o", "/dev/full"], ["estimate", "--plot", str(tmp_path)],
                 ["characterize", "-o", ""]):
        proc = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert proc.stdout == "" and proc.stderr.count("\n") == 1, (argv, proc.stderr)
        assert proc.stderr.startswith("fred: error: --") and "Traceback" not in proc.stderr


def test_cli_writes_verilog_and_plot_atomically(tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "rd.v"
    assert fred_main(["verilog", "rd", "--lanes", "1", "--dtype", "int32", "-o", str(out)]) == 0
    text = out.read_text()
    assert "\nmodule fred_rd_l1_int32(" in text and text.endswith("endmodule\n")
    old = os.umask(0o022)
    os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~old
    png = tmp_path / "fig" / "fig10.png"
    assert fred_main(["estimate", "-w", "resnet-152", "-f", "mesh", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pdf = tmp_path / "fig10.pdf"
    assert fred_main(["estimate", "-w", "resnet-152", "-f", "mesh", "--plot", str(pdf)]) == 0
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert leftovers(tmp_path) == []


def test_cli_write_error_is_one_line(tmp_path, monkeypatch, capsys):
    """An error during the final write (here: the disk 'fills up') is one line, exit 2, the old
    file intact, no temporary file left."""
    out = tmp_path / "rd.v"
    out.write_text("old")
    real_replace = os.replace

    def full(src, dst):
        raise OSError(28, "No space left on device", str(dst))

    monkeypatch.setattr(os, "replace", full)
    assert fred_main(["verilog", "rd", "--lanes", "1", "--dtype", "int32", "-o", str(out)]) == 2
    monkeypatch.setattr(os, "replace", real_replace)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err
    assert out.read_text() == "old" and leftovers(tmp_path) == []

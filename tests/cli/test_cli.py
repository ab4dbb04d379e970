"""Conventions of the ``fred`` command (issue 12): help text on every option, one meaning per
short flag, ``fred`` alone prints its help and exits 2, fast start-up (no heavy import for
``--help``/``--version``/``route``), one JSON shape per command, progress only on a terminal."""

from __future__ import annotations

import argparse
import io
import json
import math
import subprocess
import sys

import pytest

from fred import progress
from fred.cli import build_parser, main


def _parsers(parser=None, path=("fred",)):
    """(command path, parser) for every parser and sub-parser."""
    parser = parser or build_parser()
    yield path, parser
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for name, sub in act.choices.items():
                yield from _parsers(sub, path + (name,))


def test_every_option_has_help():
    missing = [f"{' '.join(path)} {act.option_strings or act.dest}"
               for path, p in _parsers() for act in p._actions
               if not isinstance(act, argparse._SubParsersAction) and not (act.help or "").strip()]
    assert not missing, "options without help text:\n" + "\n".join(missing)


#: the one meaning of every short flag (README: conventions)
SHORT = {"-h": "--help", "-o": "--output", "-p": "--ports", "-m": "--middle", "-f": "--fabric",
         "-w": "--workload", "-s": "--strategy", "-g": "--group", "-c": "--collective", "-q": "--quiet"}


def test_short_flags_mean_one_thing():
    seen = {}
    for path, p in _parsers():
        for act in p._actions:
            shorts = [o for o in act.option_strings if not o.startswith("--")]
            longs = [o for o in act.option_strings if o.startswith("--")]
            for s in shorts:
                seen.setdefault(s, set()).add(longs[0] if longs else act.dest)
    assert {s: longs for s, longs in seen.items() if len(longs) > 1} == {}
    assert {s: next(iter(longs)) for s, longs in seen.items()} == {s: SHORT[s] for s in seen}


@pytest.mark.parametrize("argv", [[], ["verilog"], ["sim"]])
def test_no_command_prints_help_exit_2(capsys, argv):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: fred") and "positional arguments" in err


def test_help_and_version_exit_0(capsys):
    assert main(["--help"]) == 0
    assert "COMMAND" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("fred ")
    for name in ("route", "collective", "estimate", "verilog", "sim"):
        assert main([name, "--help"]) == 0
        assert capsys.readouterr().out.startswith(f"usage: fred {name}")


def test_bench_help():
    r = subprocess.run([sys.executable, "-m", "fred.bench", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "usage: python -m fred.bench" in r.stdout and "cli" in r.stdout


HEAVY = ("numpy", "amaranth", "matplotlib", "yaml", "cocotb", "tqdm")
_PROBE = ("import sys; from fred.cli import main; rc = main(sys.argv[1:]); "
          "print('HEAVY', sorted({m.split('.')[0] for m in sys.modules} & set(%r)), file=sys.stderr)")


@pytest.mark.parametrize("argv,allowed", [
    (["--version"], set()), (["--help"], set()),
    (["route", "--ports", "8", "--flow", "0,1>2"], set()),
    (["collective", "--group", "0-3", "--size", "1MiB"], {"numpy", "yaml"}),
])
def test_start_up_imports_only_what_the_command_needs(argv, allowed):
    r = subprocess.run([sys.executable, "-c", _PROBE % (HEAVY,), *argv], capture_output=True, text=True,
                       timeout=120)
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("HEAVY")][-1]
    assert set(eval(line.split(" ", 1)[1])) <= allowed, line


# ---- JSON -------------------------------------------------------------------------------------
def _floats(obj):
    if isinstance(obj, float):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _floats(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _floats(v)


def _json(capsys, argv):
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == f"fred-{argv[0]}" + ("-study" if "--study" in argv else "")
    assert doc["schema_version"] == 2 and isinstance(doc["results"], list) and doc["results"]
    for x in _floats(doc):  # no float noise: at most 6 significant digits
        assert math.isfinite(x) and float(f"{x:.6g}") == x, x
    return doc


def test_json_route(capsys):
    doc = _json(capsys, ["route", "--ports", "4", "--middle", "2", "--flow", "0,1>2", "--json"])
    assert doc["ports"] == 4 and doc["results"][0]["flows"][0]["kind"] == "reduce"
    doc = _json(capsys, ["route", "--ports", "8", "--collective", "all-gather", "--group", "0-3", "--json"])
    assert len(doc["results"]) == 4


def test_json_route_study(capsys):
    doc = _json(capsys, ["route", "--study", "--ports", "8", "--samples", "1", "--json"])
    assert doc["ports"] == [8] and doc["samples"] == 1 and {r["middle"] for r in doc["results"]} == {2, 3}


def test_json_collective_one_fabric_is_a_list(capsys):
    doc = _json(capsys, ["collective", "--fabric", "fred-d", "--group", "0-3", "--size", "1GiB", "--json"])
    (r,) = doc["results"]
    assert r["size_bytes"] == 2**30 and r["time_s"] > 0 and r["algorithm_bandwidth_Bps"] > 0
    assert isinstance(r["bytes_sent_per_npu"], int)  # whole bytes stay exact


def test_json_estimate(capsys):
    doc = _json(capsys, ["estimate", "-w", "resnet-152", "-f", "fred-d", "--json"])
    (r,) = doc["results"]
    assert {"iteration_time_s", "compute_time_s", "exposed_s", "memory_per_npu_bytes"} <= set(r)
    assert doc["npu"]["peak_flops_per_s"] > 0 and doc["fabrics"] == ["fred-d"]


def test_jsonout_rounding():
    from fred.commands.jsonout import rounded

    assert rounded({"a": 0.0024330563200000003, "b": [1073741824.0, float("inf")], "c": 3}) == \
        {"a": 0.00243306, "b": [1073741824, None], "c": 3}


# ---- progress -----------------------------------------------------------------------------------
class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_on_a_terminal():
    assert not progress.enabled(stdout=io.StringIO(), stderr=_Tty())
    assert not progress.enabled(stdout=_Tty(), stderr=io.StringIO())
    assert not progress.enabled(quiet=True, stdout=_Tty(), stderr=_Tty())
    assert progress.enabled(stdout=_Tty(), stderr=_Tty())


def test_progress_bar_draws_on_stderr(monkeypatch):
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    with progress.Progress(3, "fred test", True) as bar:
        for what in ("one", "two", "three"):
            bar.start(what)
        with bar.phase("a long call"):
            pass
    text = err.getvalue()
    assert "fred test" in text and "two" in text and "a long call" in text


def test_long_command_quiet_off_a_terminal(capsys):
    """Not a terminal (pytest captures both streams): nothing but the result."""
    assert main(["route", "--study", "--ports", "8", "--samples", "1"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Routability") and err == ""


def test_timing_files_have_no_float_noise(tmp_path):
    """fred characterize writes its JSON by the same rule as --json (fred.contract.rounding)."""
    from fred.contract.timing import default_timing_path, load_timing, write_timing

    doc = json.loads(default_timing_path().read_text())
    assert all(float(f"{x:.6g}") == x for x in _floats(doc))
    doc["summary"]["rule"] = doc["summary"]["rule"]  # a copy written again reads back the same
    doc["elapsed_s"] = 123.456789012345
    out = write_timing(doc, tmp_path / "t.json")
    back = load_timing(out).data
    assert back["elapsed_s"] == 123.457 and back["summary"] == doc["summary"]


def test_bit_error_rate_help_states_the_measured_reach(capsys):
    """--bit-error-rate's help gives the range the embedded timing default's goodput curve covers
    (computed, so a new curve changes the help): a value just above it is refused."""
    from fred.model.system.bit_errors import max_bit_error_rate
    from fred.model.system.params import data_packet_flits, default_params, wire_bits

    p = default_params()
    reach = max_bit_error_rate(p.switch.fault_curve, wire_bits(p.flit_bytes),
                               data_packet_flits(p.packet_bytes, p.flit_bytes))
    for cmd in ("estimate", "collective"):
        assert main([cmd, "--help"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert f"0..{reach:.3g} with the embedded timing default" in out, cmd
    assert main(["collective", "--fabric", "fred-c", "--bit-error-rate", f"{reach * 1.5:.3g}"]) == 2
    assert "is beyond the goodput curve" in capsys.readouterr().err


def test_interrupt_leaves_no_unused_elaboratable_warnings():
    """Ctrl-C while Amaranth designs are half built (fred verilog switch): 'fred: interrupted' and
    nothing after it (Amaranth warns at exit about every element created but never used)."""
    code = (
        "import sys\n"
        "from amaranth.hdl import Elaboratable, Module\n"
        "import fred.commands.verilog as v\n"
        "from fred.cli import main\n"
        "class Part(Elaboratable):\n"
        "    def elaborate(self, platform):\n"
        "        return Module()\n"
        "def run(args):\n"
        "    global parts\n"
        "    parts = [Part() for _ in range(60)]\n"
        "    raise KeyboardInterrupt\n"
        "v.run = run\n"
        "sys.exit(main(['verilog', 'r']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 130, r.stderr
    assert r.stderr == "fred: interrupted\n", r.stderr[:500]


def test_memory_per_npu_is_an_integer_in_every_result(capsys):
    """One JSON type per key: byte counts are integers (a float rounded to 6 digits was a float)."""
    assert main(["sweep", "-w", "resnet-152", "--rule", "16", "--workers", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    keys = ("memory_per_npu_bytes", "memory_before_bytes", "memory_states_bytes", "offload_bytes",
            "hbm_capacity_bytes")
    for r in doc["results"]:
        for k in keys:
            assert isinstance(r[k], int), (k, r[k])
        assert all(isinstance(c["need_bytes"], int) for c in r["memory_candidates"])

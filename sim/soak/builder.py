"""Build and run the compiled soak harness (``sim/soak/harness.cpp``) under Verilator.

The long random soaks of the cells and fabrics run without cocotb: the stimulus and the
expected results come in bulk from the numpy golden models (:mod:`fred.sim.soak.cells`,
:mod:`fred.sim.soak.fabric`), a plain C++ harness replays the stimulus with seeded random idle
sources and back-pressure and records every transfer (:mod:`fred.sim.soak.batch_io` holds the file
formats), and Python compares the results bit for bit. The design's Verilog is the very text the
cocotb benches build; around it goes a small generated wrapper ``soak_top`` (ports
``in<k>_valid/ready/payload``, ``out<j>_...``, ``cfg``, ``clk``, ``rst``: plain names the
harness can use whatever the top's own names) and a generated header ``soak_ports.h``.

:func:`build` compiles once per design and toolchain (a build cache entry ``sim/soak-...``,
:mod:`fred.contract.cache`, in the Verilator environment of :func:`fred.sim.toolchain.verilator_env`,
objects through ccache); :func:`start` runs a stimulus file in the background, :func:`raw_speed`
runs the raw mode (every input valid, every output ready, nothing recorded: the speed of the
compiled model alone).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from fred.contract.cache import cached_entry

from fred.sim.toolchain import build_root, one_file_vars, verilator_env, verilator_root

__all__ = ["SoakDesign", "build", "start", "finish", "raw_speed", "HARNESS", "BUILD_ARGS", "TEST_OPT",
           "SPEED_OPT"]

#: the C++ harness (next to this module)
HARNESS = Path(__file__).with_name("harness.cpp")
#: Verilator options of the soak builds (part of the cache key)
#: (the C++ compiler keeps Verilator's own flags, as the cocotb builds do)
BUILD_ARGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "-Wno-fatal", "-Wno-lint",
              "-Wno-style", "--noassert")
#: C++ optimisation of the model and harness (Verilator's OPT_FAST and OPT_SLOW; part of the cache
#: key) of the soaks that check: a test's soak runs for a second or less, its build for 10-50 s of
#: CPU, and -O0 halves that build (FRED_3(12), int32 x 1: 21 s against 47 s of CPU, measured with an
#: empty build cache) while the same checks run on the same Verilog. Verilator's runtime library
#: (OPT_GLOBAL) keeps its default, so ccache shares those objects with every other build of a run.
TEST_OPT = "-O0"
#: the optimisation of a build whose speed is the figure (``make bench soak``): Verilator's default
SPEED_OPT = "-Os"


@dataclass(frozen=True)
class SoakDesign:
    """A stream block to soak: ``verilog`` text with top module ``top``, ports ``i__<k>__*``
    (``n_in``), ``o__<j>__*`` (``n_out``) carrying ``lanes`` elements of ``width`` bits, a
    ``cfg`` input of ``cfg_bits``, ``clk`` and ``rst`` (synchronous, active high). ``tag``
    names the build folder."""

    verilog: str
    top: str
    n_in: int
    n_out: int
    lanes: int
    width: int
    cfg_bits: int
    tag: str

    @property
    def payload_bits(self) -> int:
        return self.lanes * self.width

    @property
    def payload_words(self) -> int:
        return (self.payload_bits + 31) // 32

    @property
    def cfg_words(self) -> int:
        return (self.cfg_bits + 31) // 32


def wrapper_verilog(d: SoakDesign) -> str:
    """The ``soak_top`` module around ``d.top``."""
    ports = ["input clk", "input rst", f"input [{d.cfg_bits - 1}:0] cfg"]
    conns = [".clk(clk)", ".rst(rst)", ".cfg(cfg)"]
    W = d.payload_bits
    for k in range(d.n_in):
        ports += [f"input in{k}_valid", f"output in{k}_ready", f"input [{W - 1}:0] in{k}_payload"]
        conns += [f".i__{k}__{s}(in{k}_{s})" for s in ("valid", "ready", "payload")]
    for j in range(d.n_out):
        ports += [f"output out{j}_valid", f"input out{j}_ready", f"output [{W - 1}:0] out{j}_payload"]
        conns += [f".o__{j}__{s}(out{j}_{s})" for s in ("valid", "ready", "payload")]
    return ("module soak_top(\n  " + ",\n  ".join(ports) + "\n);\n"
            f"  {d.top} dut(\n    " + ",\n    ".join(conns) + "\n  );\nendmodule\n")


def ports_header(d: SoakDesign) -> str:
    """``soak_ports.h``: sizes and the port pointers of the wrapper."""
    lines = ["#include <type_traits>",
             f"#define N_IN {d.n_in}", f"#define N_OUT {d.n_out}",
             f"#define PW {d.payload_words}", f"#define CW {d.cfg_words}",
             "typedef std::remove_reference<decltype(Top::in0_payload)>::type in_t;",
             "typedef std::remove_reference<decltype(Top::out0_payload)>::type out_t;",
             "typedef std::remove_reference<decltype(Top::cfg)>::type cfg_t;",
             "struct Ports { CData* in_valid[N_IN]; CData* in_ready[N_IN]; in_t* in_payload[N_IN];",
             "  CData* out_valid[N_OUT]; CData* out_ready[N_OUT]; out_t* out_payload[N_OUT];",
             "  cfg_t* cfg; };",
             "static void bind_ports(Top* t, Ports& p) {", "  p.cfg = &t->cfg;"]
    for k in range(d.n_in):
        lines += [f"  p.in_{s}[{k}] = &t->in{k}_{s};" for s in ("valid", "ready", "payload")]
    for j in range(d.n_out):
        lines += [f"  p.out_{s}[{j}] = &t->out{j}_{s};" for s in ("valid", "ready", "payload")]
    return "\n".join(lines + ["}", ""])


def _identity(d: SoakDesign, opt: str = SPEED_OPT) -> str:
    key = [d.verilog, d.top, wrapper_verilog(d), ports_header(d), HARNESS.read_text(),
           list(BUILD_ARGS), version("verilator"), str(verilator_root())]
    key = json.dumps(key + ([opt] if opt != SPEED_OPT else [])  # Verilator's default: the key of before
                     + one_file_vars(opt))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def build(d: SoakDesign, waves: bool = False, opt: str = TEST_OPT) -> Path:
    """The harness executable for ``d`` (built once per design, harness, toolchain and ``opt``, the
    C++ optimisation: :data:`TEST_OPT` or :data:`SPEED_OPT`); ``waves``: a separate build with
    tracing (``FRED_SOAK_VCD`` names the VCD a run writes).

    A failed build raises ``RuntimeError`` naming a copy of its log."""
    if opt not in (TEST_OPT, SPEED_OPT):
        raise ValueError(f"soak build optimisation {opt!r}: {TEST_OPT} or {SPEED_OPT}")
    name = (f"soak-{d.tag}{'' if opt == SPEED_OPT else opt}-{_identity(d, opt)}"
            + ("-waves" if waves else ""))

    def make(folder: Path):
        (folder / "dut.v").write_text(d.verilog)
        (folder / "soak_top.v").write_text(wrapper_verilog(d))
        (folder / "soak_ports.h").write_text(ports_header(d))
        (folder / "soak_harness.cpp").write_text(HARNESS.read_text())
        cmd = ["verilator", "--cc", "--exe", "--build", "-j", "2", "-Mdir", "obj",
               "--top-module", "soak_top", "--prefix", "Vsoak_top", *BUILD_ARGS,
               *(["--trace"] if waves else []),
               "-o", "soak_sim",
               "dut.v", "soak_top.v", "soak_harness.cpp"]
        log = folder / "build.log"
        env = verilator_env()
        make_vars = " ".join([f"OPT_FAST={opt}", f"OPT_SLOW={opt}", *one_file_vars(opt)])
        env["MAKEFLAGS"] = f"{env.get('MAKEFLAGS', '')} {make_vars}".strip()
        with open(log, "w") as fh:
            rc = subprocess.run(cmd, cwd=folder, env=env, stdout=fh,
                                stderr=subprocess.STDOUT).returncode
        if rc != 0:
            kept = build_root() / f"{name}.failed.log"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(log.read_text())
            raise RuntimeError(f"{d.tag}: Verilator build of the soak harness failed "
                               f"(exit {rc}); log {kept}")
        return {"files": ["obj/soak_sim"], "tag": d.tag, "top": d.top, "opt": opt}

    return cached_entry("sim", name, make) / "obj" / "soak_sim"


def _speed(text: str, what: str) -> tuple:
    parts = text.split()
    if len(parts) != 4 or parts[0] != "cycles" or parts[2] != "seconds":
        raise RuntimeError(f"{what}: unexpected harness output {text!r}")
    return int(parts[1]), float(parts[3])


def start(exe: Path, stim: Path, out: Path, seed: int, vcd=None) -> subprocess.Popen:
    """Run the harness on ``stim`` in the background (see :func:`finish`); a waves build
    writes ``vcd``."""
    env = dict(os.environ, FRED_SOAK_VCD=str(vcd) if vcd else "")
    return subprocess.Popen([str(exe), "run", str(stim), str(out), str(int(seed))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(proc: subprocess.Popen, what: str) -> tuple:
    """Wait for a :func:`start` run; ``(cycles, seconds)`` of its simulation loop."""
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{what}: soak harness exited with {proc.returncode}: {err.strip()}")
    return _speed(out, what)


def raw_speed(exe: Path, stim: Path, cycles: int) -> tuple:
    """``(cycles, seconds)`` of the raw mode: the first phase's ``cfg``, every input valid with
    its first beat, every output ready, nothing recorded."""
    r = subprocess.run([str(exe), "raw", str(stim), str(int(cycles))], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"raw speed run exited with {r.returncode}: {r.stderr.strip()}")
    return _speed(r.stdout, "raw speed run")

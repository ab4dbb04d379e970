"""Build and load the compiled harness (``sim/compiled/harness.cpp``): a design's Verilog (the
FRED switch, or any top with plain input and output ports, such as the fabric) under Verilator
as a shared library that Python drives through ``ctypes``.

:func:`build` compiles once per Verilog text, harness and toolchain (a build cache entry
``sim/swsoak-...``, :mod:`fred.contract.cache`, objects through ccache). Around the switch goes a
generated wrapper ``sw_top`` whose ports are plain names ``s<k>`` (Verilator mangles the
switch's ``i__0__valid``-style names), and a generated header ``switch_ports.h`` that copies the
ports to and from two flat vectors of 32-bit words (:class:`PortMap`).

:class:`CompiledSwitch` is one model instance: :meth:`~CompiledSwitch.cycle` runs one clock
cycle in lockstep with a Python world (``set`` the inputs, ``cycle``, ``get`` the outputs
sampled after the inputs were applied -- what a cocotb bench reads in ``ReadOnly`` after
writing at ``FallingEdge``), :meth:`~CompiledSwitch.replay` runs a whole stimulus in C++
(:mod:`fred.sim.soak.switch`), :meth:`~CompiledSwitch.raw` the model alone.

:func:`build_top` / :func:`load_top` build any other top the same way (a build cache entry
``sim/lockstep-...``): the same wrapper and harness, a header with the port copies only
(:func:`lockstep_header`); the lockstep mode is the whole of it, the replay is the switch's.

Verilator runs with the cocotb benches' options (:data:`fred.sim.toolchain.BUILD_ARGS`: the same
X handling, so both simulators see the same circuit). The C++ optimisation level is part of the
build key: the closed-loop benches spend their time in
Python and use :data:`LOCKSTEP_OPT` (quick to build: ``make run`` builds the 12-port switch
once, cold); the speed bench uses :data:`REPLAY_OPT`.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np

from fred.contract.cache import cached_entry

from fred.sim.toolchain import BUILD_ARGS, build_root, one_file_vars, verilator_env, verilator_root

__all__ = ["PortMap", "CompiledSwitch", "PortSlots", "build", "build_top", "load", "load_top", "port_map",
           "lockstep_header", "HARNESS", "LOCKSTEP_OPT", "REPLAY_OPT"]

HARNESS = Path(__file__).with_name("harness.cpp")
#: C++ optimisation of a lockstep build (Python-bound; -O0 builds about 4x faster than -Os,
#: sim/toolchain.py BENCH_OPT)
LOCKSTEP_OPT = "-O0"
#: C++ optimisation of a replay build (the model's own speed matters)
REPLAY_OPT = "-O2"

_PORT = re.compile(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):0\]\s*)?([A-Za-z_]\w*)\s*;", re.M)


@dataclass(frozen=True)
class PortMap:
    """The top's ports: ``inputs`` / ``outputs`` as ``(name, bits)`` (clk left out), and each
    port's word offset in its vector."""

    inputs: tuple
    outputs: tuple

    @staticmethod
    def _offsets(ports):
        out, k = {}, 0
        for name, bits in ports:
            out[name] = (k, (bits + 31) // 32)
            k += (bits + 31) // 32
        return out, k

    @property
    def in_offsets(self):
        return self._offsets(self.inputs)[0]

    @property
    def out_offsets(self):
        return self._offsets(self.outputs)[0]

    @property
    def in_words(self):
        return self._offsets(self.inputs)[1]

    @property
    def out_words(self):
        return self._offsets(self.outputs)[1]


def port_map(verilog: str, top: str) -> PortMap:
    """The ports of module ``top`` in ``verilog`` (Yosys-style declarations, one per line)."""
    i = verilog.find(f"module {top}(")
    if i < 0:
        raise ValueError(f"no module {top} in the Verilog text")
    body = verilog[i:verilog.index("endmodule", i)]
    ins, outs = [], []
    for m in _PORT.finditer(body):
        bits = int(m.group(2)) + 1 if m.group(2) else 1
        if m.group(3) != "clk":
            (ins if m.group(1) == "input" else outs).append((m.group(3), bits))
    return PortMap(tuple(sorted(ins)), tuple(sorted(outs)))


def _all_ports(pm: PortMap):
    return [("input", n, b) for n, b in pm.inputs] + [("output", n, b) for n, b in pm.outputs]


def wrapper_verilog(pm: PortMap, top: str) -> str:
    """Module ``sw_top``: ``top`` with its ports renamed ``s<k>`` (and ``clk``)."""
    decls, conns = ["input clk"], [".clk(clk)"]
    for k, (d, name, bits) in enumerate(_all_ports(pm)):
        decls.append(f"{d} " + (f"[{bits - 1}:0] " if bits > 1 else "") + f"s{k}")
        conns.append(f".{name}(s{k})")
    return ("module sw_top(\n  " + ",\n  ".join(decls) + "\n);\n"
            f"  {top} dut(\n    " + ",\n    ".join(conns) + "\n  );\nendmodule\n")


def ports_header(pm: PortMap, ports: int, flit_bits: int, credit_bits: int) -> str:
    """``switch_ports.h`` (see sim/compiled/harness.cpp)."""
    idx = {name: k for k, (_, name, _) in enumerate(_all_ports(pm))}
    ino, outo = pm.in_offsets, pm.out_offsets
    lines = [f"#define IN_WORDS {pm.in_words}", f"#define OUT_WORDS {pm.out_words}",
             "static void apply_inputs(Top* t, const uint32_t* w) {"]
    lines += [f"  setw(t->s{idx[n]}, w + {ino[n][0]});" for n, _ in pm.inputs]
    lines += ["}", "static void read_outputs(Top* t, uint32_t* w) {"]
    lines += [f"  getw(t->s{idx[n]}, w + {outo[n][0]});" for n, _ in pm.outputs]
    lines += ["}", f"#define P {ports}", f"#define WW {ino['i__0__payload'][1]}",
              f"#define CREDIT_BITS {credit_bits}", f"#define OFF_LAST {flit_bits}",
              f"#define OFF_PROBE {flit_bits + 2}", "#define OFF_DATA_VC 4"]

    def arr(name, table, fmt):
        vals = ", ".join(str(table[fmt.format(p)][0]) for p in range(ports))
        lines.append(f"static const int {name}[P] = {{{vals}}};")

    arr("OFF_IN_PAYLOAD", ino, "i__{}__payload")
    arr("OFF_IN_VALID", ino, "i__{}__valid")
    arr("OFF_OUT_READY", ino, "o__{}__ready")
    arr("OFF_CREDIT_I", ino, "credit_i__{}")
    arr("OFF_IN_READY", outo, "i__{}__ready")
    arr("OFF_OUT_VALID", outo, "o__{}__valid")
    arr("OFF_OUT_PAYLOAD", outo, "o__{}__payload")
    arr("OFF_CREDIT_O", outo, "credit_o__{}")
    for name in ("round_start", "act_vc", "act_phase", "ready_vcs"):
        lines.append(f"#define OFF_{name.upper()} {outo[name][0]}")
    return "\n".join(lines + [""])


def lockstep_header(pm: PortMap) -> str:
    """The header of a top that is not the switch: the port copies of :func:`ports_header`,
    and the replay's switch constants (harness.cpp compiles its replay for every top) all
    naming one spare word past the ports in each vector, a 1-port switch with no traffic; the
    replay is never run on such a build (:meth:`CompiledSwitch.replay` refuses). The harness
    stays one text, so the switch builds keep their keys."""
    idx = {name: k for k, (_, name, _) in enumerate(_all_ports(pm))}
    ino, outo = pm.in_offsets, pm.out_offsets
    si, so = pm.in_words, pm.out_words          # the spare words
    lines = [f"#define IN_WORDS {si + 1}", f"#define OUT_WORDS {so + 1}",
             "static void apply_inputs(Top* t, const uint32_t* w) {"]
    lines += [f"  setw(t->s{idx[n]}, w + {ino[n][0]});" for n, _ in pm.inputs]
    lines += ["}", "static void read_outputs(Top* t, uint32_t* w) {"]
    lines += [f"  getw(t->s{idx[n]}, w + {outo[n][0]});" for n, _ in pm.outputs]
    lines += ["}", "#define P 1", "#define WW 1", "#define CREDIT_BITS 1", "#define OFF_LAST 0",
              "#define OFF_PROBE 0", "#define OFF_DATA_VC 0"]
    for name in ("OFF_IN_PAYLOAD", "OFF_IN_VALID", "OFF_OUT_READY", "OFF_CREDIT_I"):
        lines.append(f"static const int {name}[P] = {{{si}}};")
    for name in ("OFF_IN_READY", "OFF_OUT_VALID", "OFF_OUT_PAYLOAD", "OFF_CREDIT_O"):
        lines.append(f"static const int {name}[P] = {{{so}}};")
    for name in ("round_start", "act_vc", "act_phase", "ready_vcs"):
        lines.append(f"#define OFF_{name.upper()} {so}")
    return "\n".join(lines + [""])


def _make_vars(opt) -> str:
    """The make variables of a build at ``opt``: the runtime at the same level, and an -O0 build's
    model as one C++ file (:data:`fred.sim.toolchain.ONE_FILE_BUILD`)."""
    return " ".join([f"OPT_FAST={opt}", f"OPT_SLOW={opt}", f"OPT_GLOBAL={opt}", *one_file_vars(opt)])


def _identity(verilog, top, opt, header, wrapper) -> str:
    key = [verilog, top, opt, header, wrapper, HARNESS.read_text(), list(BUILD_ARGS),
           version("verilator"), str(verilator_root())]
    key = json.dumps(key + one_file_vars(opt))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def build(verilog: str, sw, tag: str, opt: str = LOCKSTEP_OPT, top: str = "fred_switch") -> Path:
    """The shared library of switch ``sw`` (:class:`fred.hdl.switch.top.Switch`, emitted as
    ``verilog`` with top module ``top``), built once per text, harness, ``opt`` and toolchain.
    A failed build raises ``RuntimeError`` naming a copy of its log."""
    pm = port_map(verilog, top)
    return _build(verilog, top, tag, opt, pm, ports_header(pm, sw.P, sw.flit_bits, sw.credit_bits),
                  "swsoak", "switch")


def build_top(verilog: str, top: str, tag: str, opt: str = LOCKSTEP_OPT) -> Path:
    """The shared library of any top ``top`` in ``verilog`` (lockstep only: :func:`lockstep_header`),
    built once per text, harness, ``opt`` and toolchain."""
    pm = port_map(verilog, top)
    return _build(verilog, top, tag, opt, pm, lockstep_header(pm), "lockstep", top)


def _build(verilog, top, tag, opt, pm, header, prefix, what) -> Path:
    wrapper = wrapper_verilog(pm, top)
    name = f"{prefix}-{tag}{opt}-{_identity(verilog, top, opt, header, wrapper)}"

    def make(folder: Path):
        (folder / "dut.v").write_text(verilog)
        (folder / "sw_top.v").write_text(wrapper)
        (folder / "switch_ports.h").write_text(header)
        (folder / "harness.cpp").write_text(HARNESS.read_text())
        cmd = ["verilator", "--cc", "--exe", "--build", "-j", "2", "-Mdir", "obj",
               "--top-module", "sw_top", "--prefix", "Vtop", *BUILD_ARGS,
               "-CFLAGS", "-fPIC -I..", "-LDFLAGS", "-shared", "-o", "libswitch.so",
               "dut.v", "sw_top.v", "harness.cpp"]
        env = verilator_env()
        # OPT_GLOBAL: Verilator's runtime (verilated.cpp, -Os by default) at the same level; the
        # build folder named relatively (-I..): the same command line in every build, so the
        # compiler cache serves the runtime's objects from the first build on
        env["MAKEFLAGS"] = f"{env.get('MAKEFLAGS', '')} {_make_vars(opt)}".strip()
        log = folder / "build.log"
        with open(log, "w") as fh:
            rc = subprocess.run(cmd, cwd=folder, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            kept = build_root() / f"{name}.failed.log"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(log.read_text())
            raise RuntimeError(f"{tag}: Verilator build of the {what} harness failed (exit {rc}); "
                               f"log {kept}")
        (folder / "ports.json").write_text(json.dumps([pm.inputs, pm.outputs]))
        return {"files": ["obj/libswitch.so", "ports.json"], "tag": tag, "opt": opt}

    return cached_entry("sim", name, make)


@dataclass(frozen=True)
class PortSlots:
    """:meth:`CompiledSwitch.port_slots`: per-port word indices and payload names."""

    in_valid: list
    out_ready: list
    credit_in: list
    in_ready: list
    out_valid: list
    credit_out: list
    in_payload: list
    out_payload: list


class CompiledSwitch:
    """One instance of a built switch (:func:`load`) or other top (:func:`load_top`, then
    ``replay=False``). ``set(name, value)`` / ``get(name)`` by port name (ints of any width);
    :attr:`inv` / :attr:`outv` are the raw word vectors."""

    def __init__(self, folder: Path, replay: bool = True):
        self.can_replay = replay
        ins, outs = json.loads((folder / "ports.json").read_text())
        self.ports = PortMap(tuple(map(tuple, ins)), tuple(map(tuple, outs)))
        lib = ctypes.CDLL(str(folder / "obj" / "libswitch.so"))
        lib.sim_new.restype = ctypes.c_void_p
        lib.sim_free.argtypes = [ctypes.c_void_p]
        for f in ("sim_in", "sim_out"):
            getattr(lib, f).restype = ctypes.POINTER(ctypes.c_uint32)
            getattr(lib, f).argtypes = [ctypes.c_void_p]
        lib.sim_cycle.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        lib.sim_cycles.restype = ctypes.c_uint64
        lib.sim_cycles.argtypes = [ctypes.c_void_p]
        lib.sim_raw.restype = ctypes.c_double
        lib.sim_raw.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        lib.sim_replay.restype = ctypes.c_uint64
        lib.sim_replay.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                   ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_double)]
        self._lib = lib
        self._h = ctypes.c_void_p(lib.sim_new())
        pm = self.ports
        self.inv = np.ctypeslib.as_array(lib.sim_in(self._h), shape=(pm.in_words,))
        self.outv = np.ctypeslib.as_array(lib.sim_out(self._h), shape=(pm.out_words,))
        self.in_addr = ctypes.addressof(lib.sim_in(self._h).contents)
        self.out_addr = ctypes.addressof(lib.sim_out(self._h).contents)
        self.ino, self.outo = pm.in_offsets, pm.out_offsets
        self._cycle = lib.sim_cycle

    def close(self):
        if self._h:
            self._lib.sim_free(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:        # interpreter shutdown
            pass

    def port_slots(self, ports: int) -> "PortSlots":
        """Per port ``p < ports``: the word index of each 1-word handshake signal in
        :attr:`inv` / :attr:`outv`, and the names of the wide payloads (for :meth:`set` /
        :meth:`get`), as the cycle-stepped drivers read them every cycle."""
        ino, outo, r = self.ino, self.outo, range(ports)
        return PortSlots(in_valid=[ino[f"i__{p}__valid"][0] for p in r],
                         out_ready=[ino[f"o__{p}__ready"][0] for p in r],
                         credit_in=[ino[f"credit_i__{p}"][0] for p in r],
                         in_ready=[outo[f"i__{p}__ready"][0] for p in r],
                         out_valid=[outo[f"o__{p}__valid"][0] for p in r],
                         credit_out=[outo[f"credit_o__{p}"][0] for p in r],
                         in_payload=[f"i__{p}__payload" for p in r],
                         out_payload=[f"o__{p}__payload" for p in r])

    def set(self, name: str, value: int):
        off, n = self.ino[name]
        ctypes.memmove(self.in_addr + 4 * off, int(value).to_bytes(4 * n, "little"), 4 * n)

    def get(self, name: str) -> int:
        off, n = self.outo[name]
        return int.from_bytes(ctypes.string_at(self.out_addr + 4 * off, 4 * n), "little")

    def cycle(self, n: int = 1):
        """``n`` clock cycles with the current inputs; the outputs are the last cycle's."""
        self._cycle(self._h, n)

    @property
    def cycles(self) -> int:
        return int(self._lib.sim_cycles(self._h))

    def raw(self, n: int) -> float:
        """Seconds of ``n`` cycles of the model alone with the current inputs."""
        return float(self._lib.sim_raw(self._h, int(n)))

    def replay(self, stim: np.ndarray, seed: int, cap: int) -> tuple:
        """Run a replay stimulus (sim/compiled/harness.cpp); ``(result words, seconds)``."""
        if not self.can_replay:
            raise RuntimeError("the replay runs on a switch build (load), not on this top (load_top)")
        stim = np.ascontiguousarray(stim, dtype=np.uint32)
        res = np.zeros(cap, np.uint32)
        secs = ctypes.c_double()
        n = self._lib.sim_replay(self._h, stim.ctypes.data, int(seed), res.ctypes.data, cap,
                                 ctypes.byref(secs))
        if res[0] == 2 and n == 2:
            raise RuntimeError(f"replay result needs {int(res[1])} words, the buffer holds {cap}")
        return res[:n], secs.value


def load(verilog: str, sw, tag: str, opt: str = LOCKSTEP_OPT) -> CompiledSwitch:
    """Build (cached) and instantiate the switch harness."""
    return CompiledSwitch(build(verilog, sw, tag, opt))


def load_top(verilog: str, top: str, tag: str, opt: str = LOCKSTEP_OPT) -> CompiledSwitch:
    """Build (cached) and instantiate the lockstep harness of top ``top`` (:func:`build_top`)."""
    return CompiledSwitch(build_top(verilog, top, tag, opt), replay=False)

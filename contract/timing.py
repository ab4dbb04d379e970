"""Timing files: the measured link from the RTL to the system model (the whole contract).

A timing file is the JSON document :func:`fred.sim.characterize.run.characterize` measures and
:func:`write_timing` writes (``fred characterize -o FILE``; schema in docs/characterization.md).
This module holds all of the contract: the schema (:data:`KIND`, :data:`SCHEMA_VERSION`,
:func:`validate_timing`), the summary the model uses (:func:`summarize`), the writer
(:func:`write_timing`), the reader (:func:`load_timing`) and the embedded default
(``contract/data/timing-default.json``, package data of :mod:`fred.contract`: a characterization
of the default configuration produced by the same code and checked against the RTL by
tests/sim/test_characterize.py). The model never types switch figures in: it loads a timing file and
turns it into its switch parameters (:func:`fred.model.system.timing.switch_timing`).

Every problem with a file (missing, not JSON, wrong schema version, missing or ill-typed field)
raises :class:`TimingFileError` with one line naming the file and the problem and saying how to
regenerate it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from fred import FredError

from .inputs import decode_text, display_name, input_problem, read_input
from .outputs import write_atomic
from .rounding import rounded

__all__ = ["SCHEMA_VERSION", "SCHEMA_CHANGES", "READ_VERSIONS", "KIND", "DEFAULT_NAME", "TimingFile", "TimingFileError", "load_timing", "timing_text",
           "validate_timing", "summarize", "write_timing", "default_timing_path", "FLOW_KINDS"]

#: the schema this module writes
SCHEMA_VERSION = 5
#: what each schema version changed; the reader reads every version listed here
SCHEMA_CHANGES = {
    1: "the first schema: cells, fabrics, switch, summary",
    2: "adds the optional section area_at_width (area of the cells, the switch chiplets and the "
       "switch at the chiplets' real width, written by `fred characterize --area-lanes N`); "
       "a version 1 file reads the same, without that section",
    3: "adds switch.cut_through_cycles (activation, first data flit and preemption measured from "
       "the header of the last input packet) and summary.forwarding; a cut-through switch's "
       "summary takes its switch figures from cut_through_cycles. A version 1 or 2 file is a "
       "store-and-forward switch (latencies from the last input flit): it reads the same, and "
       "the model keeps charging one packet's link time per switch hop for it",
    4: "adds the optional section link_faults (goodput of Go-Back-N through the switch vs the "
       "fault rate per flit, measured by the fault bench: sim/characterize/faults.py); the model "
       "derates its links by it for a chosen bit-error rate; a version 1, 2 or 3 file reads the "
       "same, without that section (no bit-error derating possible)",
    5: "adds the optional section all_to_all (all-to-all throughput per routing method, measured "
       "by sim/characterize/all_to_all.py); a version 1 to 4 file reads the same, without it",
}
READ_VERSIONS = tuple(SCHEMA_CHANGES)
#: file kind marker
KIND = "fred-timing"
#: the embedded default, inside package ``fred.contract`` (contract/data/)
DEFAULT_NAME = "timing-default.json"
#: largest timing file read (a `fred characterize` one is ~100 KB)
MAX_TIMING_BYTES = 16 * 2**20
#: the flow kinds characterized
FLOW_KINDS = ("all-reduce", "reduce", "multicast", "unicast")


class TimingFileError(FredError, ValueError):
    """A timing file that cannot be used (one-line message with the fix)."""


def _fix(path) -> str:
    if path and str(path).startswith("<embedded"):
        target = f"contract/data/{DEFAULT_NAME}"
    else:
        target = path if path and not str(path).startswith("<") else "FILE"
    return f"regenerate it with `fred characterize -o {target}`"


def default_timing_path():
    """A path-like to the embedded default timing file (``importlib.resources``)."""
    from importlib.resources import files

    return files("fred.contract") / "data" / DEFAULT_NAME


@dataclass(frozen=True)
class TimingFile:
    """A validated timing file.

    ``path``: where it was read from (``"<embedded default>"`` style name for the package copy);
    ``data``: the whole JSON document; ``embedded``: True for the package default.
    """

    path: str
    data: dict
    embedded: bool = False

    @property
    def schema_version(self) -> int:
        return self.data["schema_version"]

    @property
    def summary(self) -> dict:
        return self.data["summary"]

    @property
    def latency_cycles(self) -> float:
        """Switch traversal latency in cycles (the value the model uses)."""
        return float(self.summary["switch_latency_cycles"])

    @property
    def cut_through(self) -> bool:
        """The measured switch forwards cut-through (schema 3 ``summary.forwarding``; older
        files: store-and-forward)."""
        return self.summary.get("forwarding") == "cut-through"

    @property
    def beats_per_cycle_per_port(self) -> float:
        """In-switch collective throughput per port, beats per cycle (the value the model uses)."""
        return float(self.summary["beats_per_cycle_per_port"])

    @property
    def revision(self) -> str:
        src = self.data["source"]
        return src["revision"] + ("+dirty" if src.get("dirty") else "")

    @property
    def rtl(self) -> dict:
        return self.data["rtl"]

    @property
    def fabrics(self) -> dict:
        return self.data["fabrics"]

    @property
    def clock(self) -> dict | None:
        """The optional ``clock`` section (gate levels, FPGA fmax; ``fred timing``), or None."""
        return self.data.get("clock")

    @property
    def link_faults(self) -> dict | None:
        """The goodput-vs-fault-rate curve (schema 4; None when the file has none)."""
        return self.data.get("link_faults")

    @property
    def all_to_all(self) -> dict | None:
        """All-to-all throughput per routing method (schema 5; None when the file has none)."""
        return self.data.get("all_to_all")

    @property
    def area_at_width(self) -> dict | None:
        """The area at the chiplets' real width (schema 2; None when the file has none)."""
        return self.data.get("area_at_width")

    def describe(self) -> str:
        """One line for model outputs: which file, which RTL, which figures."""
        r = self.rtl
        src = self.data["source"]
        rev = src["revision"][:12] + ("+dirty" if src.get("dirty") else "")
        return (f"{self.path} (schema {self.schema_version}, rev {rev}, "
                f"{r['dtype']} x {r['lanes']} lanes: {self.latency_cycles:g} cycles, "
                f"{self.beats_per_cycle_per_port:g} beats/cycle/port)")


def _need(d, key, types, where, path):
    if not isinstance(d, dict) or key not in d:
        raise TimingFileError(f"timing file {path}: missing field {where}{key}; {_fix(path)}")
    v = d[key]
    if types is not None and (not isinstance(v, types) or isinstance(v, bool) and bool not in
                              (types if isinstance(types, tuple) else (types,))):
        raise TimingFileError(f"timing file {path}: field {where}{key} = {v!r:.40} has the wrong "
                              f"type; {_fix(path)}")
    return v


def _num(d, key, where, path, positive=False, allow_none=False, high=None):
    if allow_none and isinstance(d, dict) and d.get(key, 0) is None:
        return None
    v = _need(d, key, (int, float), where, path)
    if not math.isfinite(v) or v < 0 or (positive and v <= 0):
        raise TimingFileError(f"timing file {path}: field {where}{key} = {v!r} must be "
                              f"{'> 0' if positive else '>= 0'} and finite; {_fix(path)}")
    if high is not None and v > high:
        raise TimingFileError(f"timing file {path}: field {where}{key} = {v!r} is too large: must "
                              f"be <= {high:g}; {_fix(path)}")
    return v


#: largest latency (cycles) a timing file may hold: the measured figures are tens of cycles; a
#: million (1 ms at 1 GHz) is no measurement of this RTL
MAX_CYCLES = 1_000_000


def _summary(summ, path) -> None:
    """The figures the model uses: present, numbers, in range, and consistent."""
    w = "summary."
    lat = _num(summ, "switch_latency_cycles", w, path, positive=True, high=MAX_CYCLES)
    bpc = _num(summ, "beats_per_cycle_per_port", w, path, positive=True)
    if bpc > 1.0 + 1e-9:
        raise TimingFileError(f"timing file {path}: summary.beats_per_cycle_per_port = {bpc} "
                              f"exceeds 1 beat per cycle; {_fix(path)}")
    _need(summ, "chiplets", list, w, path)
    got = {}
    for key in ("fabric_latency_cycles", "switch_overhead_cycles", "phase_switch_cycles",
                "preemption_cycles_max", "activation_cycles"):
        if key in summ:
            got[key] = _num(summ, key, w, path, allow_none=True, high=MAX_CYCLES)
    fab, over = got.get("fabric_latency_cycles"), got.get("switch_overhead_cycles")
    if fab is not None and over is not None and abs(fab + over - lat) > 1e-9 * max(1.0, lat):
        raise TimingFileError(f"timing file {path}: summary.switch_latency_cycles = {lat!r} is not "
                              f"fabric_latency_cycles + switch_overhead_cycles = {fab!r} + {over!r}; "
                              f"{_fix(path)}")
    fwd = summ.get("forwarding", "store-and-forward")
    if fwd not in ("cut-through", "store-and-forward"):
        raise TimingFileError(f"timing file {path}: summary.forwarding = {fwd!r:.40} must be "
                              f"cut-through or store-and-forward; {_fix(path)}")
    act, pre = got.get("activation_cycles"), got.get("preemption_cycles_max")
    if act is not None and pre is not None and act > pre:
        raise TimingFileError(f"timing file {path}: summary.activation_cycles = {act!r} exceeds "
                              f"preemption_cycles_max = {pre!r} (a preemption includes an activation); "
                              f"{_fix(path)}")


def validate_timing(doc, path="<timing>") -> dict:
    """Check ``doc`` (a parsed timing file) against schema :data:`SCHEMA_VERSION`; return it."""
    if not isinstance(doc, dict):
        raise TimingFileError(f"timing file {path}: not a JSON object; {_fix(path)}")
    if doc.get("kind") != KIND:
        raise TimingFileError(f"timing file {path}: not a FRED timing file (kind "
                              f"{doc.get('kind')!r}, expected {KIND!r}); {_fix(path)}")
    ver = doc.get("schema_version")
    if isinstance(ver, bool) or ver not in READ_VERSIONS:
        raise TimingFileError(f"timing file {path}: schema version {ver!r}, this fred reads "
                              f"versions {', '.join(map(str, READ_VERSIONS))} (version "
                              f"{SCHEMA_VERSION} {SCHEMA_CHANGES[SCHEMA_VERSION].split(' (')[0]}); "
                              f"{_fix(path)}")
    src = _need(doc, "source", dict, "", path)
    _need(src, "revision", str, "source.", path)
    _need(src, "dirty", bool, "source.", path)
    _need(doc, "tools", dict, "", path)
    _need(doc, "seed", int, "", path)
    rtl = _need(doc, "rtl", dict, "", path)
    _need(rtl, "dtype", str, "rtl.", path)
    _num(rtl, "lanes", "rtl.", path, positive=True)
    _num(rtl, "middle", "rtl.", path, positive=True)
    _need(doc, "cells", dict, "", path)
    fabrics = _need(doc, "fabrics", dict, "", path)
    for name, fab in fabrics.items():
        w = f"fabrics.{name}."
        _num(fab, "ports", w, path, positive=True)
        for section in ("latency_cycles", "beats_per_cycle_per_port"):
            sec = _need(fab, section, dict, w, path)
            for kind in FLOW_KINDS:
                _num(sec, kind, f"{w}{section}.", path, allow_none=True,
                     high=MAX_CYCLES if section == "latency_cycles" else 1.0 + 1e-9)
    _summary(_need(doc, "summary", dict, "", path), path)
    if "clock" in doc:
        _clock(doc["clock"], path)
    if doc.get("area_at_width") is not None:
        if ver < 2:
            raise TimingFileError(f"timing file {path}: section area_at_width needs schema version 2 "
                                  f"(this file says {ver}); {_fix(path)}")
        _area_at_width(doc["area_at_width"], path)
    if doc.get("link_faults") is not None:
        if ver < 4:
            _bad(path, f"section link_faults needs schema version 4 (this file says {ver})")
        _link_faults(doc["link_faults"], path)
    if doc.get("all_to_all") is not None:
        if ver < 5:
            _bad(path, f"section all_to_all needs schema version 5 (this file says {ver})")
        _all_to_all(doc["all_to_all"], path)
    return doc


#: gate levels beyond this are no measurement of a pipelined cell or chiplet
MAX_GATE_LEVELS = 100_000
#: an FPGA fmax above this (MHz) is no place-and-route result
MAX_FMAX_MHZ = 10_000


def _clock(clock, path) -> None:
    """The optional ``clock`` section (``fred timing``): gate levels per design and, when
    present, the FPGA fmax per design; every figure a number in range."""
    if not isinstance(clock, dict):
        raise TimingFileError(f"timing file {path}: field clock is not an object; {_fix(path)}")
    gl = _need(clock, "gate_levels", dict, "clock.", path)
    for group in ("cells", "fabrics"):
        sec = _need(gl, group, dict, "clock.gate_levels.", path)
        for name, rec in _designs(sec, group):
            _num(rec, "levels", f"clock.gate_levels.{group}.{name}.", path, high=MAX_GATE_LEVELS)
            _need(rec, "limiting_stage", str, f"clock.gate_levels.{group}.{name}.", path)
    if "fpga" in clock:
        fp = _need(clock, "fpga", dict, "clock.", path)
        _need(fp, "device", str, "clock.fpga.", path)
        for group in ("cells", "fabrics"):
            sec = _need(fp, group, dict, "clock.fpga.", path)
            for name, rec in _designs(sec, group):
                _num(rec, "fmax_mhz", f"clock.fpga.{group}.{name}.", path, positive=True,
                     high=MAX_FMAX_MHZ)


def _designs(sec, group):
    """(name, record) of a ``cells`` (kind -> dtype -> record) or ``fabrics`` (name -> record)
    section."""
    if group == "fabrics":
        return list(sec.items())
    return [(f"{k}.{t}", rec) for k, by in sec.items() for t, rec in
            (by.items() if isinstance(by, dict) else [("?", by)])]


def _area_at_width(sec, path) -> None:
    """Schema 2's optional section: per design, cells, flip-flops, gate equivalents and mm²."""
    w = "area_at_width."
    if not isinstance(sec, dict):
        raise TimingFileError(f"timing file {path}: field area_at_width is not an object; {_fix(path)}")
    _num(sec, "lanes", w, path, positive=True)
    _need(sec, "dtype", str, w, path)
    for name, d in _need(sec, "designs", dict, w, path).items():
        for key in ("cells", "flipflops", "ge", "logic_mm2", "sram_bits", "sram_mm2", "total_mm2"):
            _num(d, key, f"{w}designs.{name}.", path)


def _link_faults(sec, path) -> None:
    """Schema 4's optional section: the measured goodput curve, rates increasing."""
    w = "link_faults."
    if not isinstance(sec, dict):
        raise TimingFileError(f"timing file {path}: field link_faults is not an object; {_fix(path)}")
    for key in ("ports", "lanes", "flit_bits", "wire_bits", "baseline_cycles"):
        _num(sec, key, w, path, positive=True, high=MAX_CYCLES if key == "baseline_cycles" else None)
    if _num(sec, "packet_flits", w, path, positive=True, high=256) < 2:
        raise TimingFileError(f"timing file {path}: field {w}packet_flits must be >= 2 (a header "
                              f"and data); {_fix(path)}")
    _need(sec, "dtype", str, w, path)
    pts = _need(sec, "points", list, w, path)
    if not pts:
        raise TimingFileError(f"timing file {path}: field {w}points is empty; {_fix(path)}")
    last, prev = -1.0, None
    for k, pt in enumerate(pts):
        where = f"{w}points[{k}]."
        rate = _num(pt, "rate_per_flit", where, path, high=1.0)
        good = _num(pt, "goodput", where, path, positive=True, high=1.0)   # a share of the fault-free rate
        _num(pt, "retransmissions", where, path)
        if rate <= last:
            raise TimingFileError(f"timing file {path}: {where}rate_per_flit = {rate!r} does not "
                                  f"increase; {_fix(path)}")
        if prev is not None and good > prev[1]:
            _bad(path, f"{where}goodput = {good!r} at rate_per_flit {rate!r} is above the {prev[1]!r} at "
                       f"{prev[0]!r} ({w}points[{k - 1}]): goodput cannot rise with the fault rate")
        last, prev = rate, (rate, good)


#: the figures of every all-to-all method (each 0 < x <= 1)
A2A_FRACTIONS = ("uniform_flits_per_cycle_per_port", "skewed_fraction_of_bound")


def _bad(path, msg):
    raise TimingFileError(f"timing file {path}: {msg}; {_fix(path)}")


def _a2a_methods(methods, where, path) -> None:
    for name in ("precompiled", "online"):
        _need(methods, name, dict, f"{where}.", path)
    for name in methods:
        w, fig = f"{where}.{name}.", _need(methods, name, dict, f"{where}.", path)
        for key in A2A_FRACTIONS:
            _num(fig, key, w, path, positive=True, high=1.0)
        if name == "precompiled":
            _num(fig, "config_cycles_per_phase", w, path, high=MAX_CYCLES)
            if _need(fig, "phases_uniform", int, w, path) < 1:
                _bad(path, f"field {w}phases_uniform = {fig['phases_uniform']!r} must be >= 1")


def _all_to_all(sec, path) -> None:
    """Schema 5's optional section (fields: docs/characterization.md)."""
    w = "all_to_all."
    if not isinstance(sec, dict):
        _bad(path, "field all_to_all is not an object")
    _num(sec, "zipf_exponent", w, path, positive=True, high=100)
    if (ports := _need(sec, "ports", int, w, path)) < 2:
        _bad(path, f"field {w}ports = {ports!r} must be >= 2")
    methods = _need(sec, "methods", dict, w, path)
    _a2a_methods(methods, f"{w}methods", path)
    by = _need(sec, "by_ports", dict, w, path)
    for p, m in by.items():
        if not (isinstance(p, str) and p.isascii() and p.isdigit() and int(p) >= 2):
            _bad(path, f"field {w}by_ports has key {p!r:.20}: must be a port count >= 2")
        _a2a_methods(_need(by, p, dict, f"{w}by_ports.", path), f"{w}by_ports.{p}", path)
    if by.get(str(ports)) != methods or max(map(int, by)) != ports:
        _bad(path, f"field {w}methods differs from {w}by_ports.{ports}, or {ports} is not the "
                   f"largest switch there (methods are the figures of the largest)")
    if (dm := _need(sec, "default_method", str, w, path)) not in methods:
        _bad(path, f"field {w}default_method = {dm!r:.40} is not one of {w}methods "
                   f"({', '.join(sorted(methods))})")
    if not _need(sec, "measured_by", str, w, path).strip():
        _bad(path, f"field {w}measured_by is empty")


def load_timing(path=None) -> TimingFile:
    """Load and validate a timing file; ``None`` = the embedded default."""
    if path is None:
        res = default_timing_path()
        name = f"<embedded default fred/contract/data/{DEFAULT_NAME}>"
        try:
            text = res.read_text()
        except (FileNotFoundError, OSError):
            raise TimingFileError(f"timing file {name}: missing from the installed package; "
                                  f"{_fix(name)}") from None
        embedded = True
    else:
        name = display_name(path)
        problem = input_problem(path, MAX_TIMING_BYTES)
        if problem == "is a folder, not a file":
            problem = "is a directory"
        if problem == "no such file":
            raise TimingFileError(f"timing file {name}: {problem}; {_fix(name)}")
        if problem:    # a folder or a device: nothing to regenerate there
            raise TimingFileError(f"timing file {name}: {problem}; give the path of a timing file "
                                  f"(written by `fred characterize -o FILE`)")
        try:
            text = decode_text(read_input(path, "timing file", MAX_TIMING_BYTES), f"timing file {name}")
        except ValueError as exc:
            raise TimingFileError(f"{exc}; {_fix(name)}") from None
        embedded = False
    try:
        doc = json.loads(text)
    except RecursionError:
        raise TimingFileError(f"timing file {name}: corrupt JSON (nested too deeply); {_fix(name)}") from None
    except ValueError as exc:
        raise TimingFileError(f"timing file {name}: corrupt JSON (line {getattr(exc, 'lineno', '?')}); "
                              f"{_fix(name)}") from None
    validate_timing(doc, name)
    return TimingFile(path=name, data=doc, embedded=embedded)


def summarize(doc: dict) -> dict:
    """The figures the model uses, from the chiplet (and switch) measurements.

    * ``fabric_latency_cycles``: the worst traversal latency of a chiplet fabric over chiplets
      and flow kinds (a logical switch traversal crosses one chiplet fabric);
    * ``switch_overhead_cycles``: what the switch adds around its fabric on the path of the
      first data flit (input buffer, header decode, configuration, output), measured by
      measure_switch: ``first_data_cycles.same_config - params.fabric_latency``; 0 when the
      switch was not measured;
    * ``switch_latency_cycles`` = fabric + overhead: the traversal latency the model charges;
    * ``beats_per_cycle_per_port``: the lowest zero-back-pressure throughput per port over
      chiplets and flow kinds (the rate an in-switch collective is capped at, x link bandwidth);
    * ``phase_switch_cycles``, ``preemption_cycles_max``, ``activation_cycles`` (an idle
      switch's activation of a new configuration, the part of a preemption every phase pays):
      from measure_switch (None without);
    * ``forwarding``: ``"cut-through"`` when the measured switch says so (schema 3: the
      overhead, preemption and activation then come from ``switch.cut_through_cycles``,
      measured from the header of the last input packet), else ``"store-and-forward"``
      (measured from the last input flit; the model adds one packet time per switch hop).
    """
    fabs = doc["fabrics"]
    lat = [v for f in fabs.values() for v in f["latency_cycles"].values() if v is not None]
    thr = [v for f in fabs.values() for v in f["beats_per_cycle_per_port"].values() if v is not None]
    if not lat or not thr:
        raise ValueError("no fabric figures to summarize")
    sw = doc.get("switch") or {}
    overhead, phase, preempt, activation = 0, None, None, None
    cut = sw.get("cut_through_cycles") if isinstance(sw.get("cut_through_cycles"), dict) else None
    forwarding = "cut-through" if cut is not None else "store-and-forward"
    src = cut if cut is not None else {"first_data": sw.get("first_data_cycles"),
                                       "preemption": sw.get("preemption_cycles"),
                                       "activation": sw.get("activation_cycles")}
    try:
        overhead = max(0, int(src["first_data"]["same_config"])
                       - int(sw["params"]["fabric_latency"]))
        phase = sw.get("phase_switch_cycles")
        preempt = (src.get("preemption") or {}).get("max")
        activation = (src.get("activation") or {}).get("new_config")
    except (KeyError, TypeError, ValueError):
        overhead = 0
    return {
        "chiplets": sorted(fabs),
        "fabric_latency_cycles": max(lat),
        "switch_overhead_cycles": overhead,
        "switch_latency_cycles": max(lat) + overhead,
        "beats_per_cycle_per_port": min(thr),
        "phase_switch_cycles": phase,
        "preemption_cycles_max": preempt,
        "activation_cycles": activation,
        "forwarding": forwarding,
        "rule": "switch_latency_cycles = max chiplet fabric latency over chiplets and flow kinds "
                "+ switch overhead (measure_switch first data flit minus its fabric latency; "
                "cut-through: from the header of the last input packet, else from its last "
                "flit); beats_per_cycle_per_port = min over chiplets and flow kinds",
    }


def write_timing(doc: dict, path) -> Path:
    """Validate ``doc`` and write it as JSON (atomically) to ``path``; return the path. Numbers
    are written without float noise (:func:`fred.contract.rounding.rounded`: 6 significant
    digits, whole-valued floats as integers)."""
    validate_timing(doc, str(path))
    return write_atomic(path, timing_text(doc))


def timing_text(doc: dict) -> str:
    """The text :func:`write_timing` writes for ``doc``."""
    return json.dumps(rounded(doc), indent=1, sort_keys=True, allow_nan=False) + "\n"

"""The model's switch timing (:class:`SwitchTiming`) and how it is read from a timing file.

A timing file (:mod:`fred.contract.timing`, written by ``fred characterize``) gives cycles:

* switch traversal latency = ``summary.switch_latency_cycles`` x clock period
  (``latency_cycles`` / ``clock_hz``);
* in-switch collective bandwidth = link bandwidth x ``summary.beats_per_cycle_per_port``;
* phase switch, preemption and activation latencies from the summary;
* the switch's all-to-all throughput (:class:`AllToAllTiming`, schema 5's ``all_to_all``
  section; :func:`all_to_all_timing`): an all-to-all on a FRED fabric moves its bytes at the
  measured share of line rate, not at line rate (:func:`fred.model.collectives.api.expand`). A file
  without the section (schema 4 and older) keeps line rate, and says so (:attr:`SwitchTiming.all_to_all_source`).

The default parameter set (:func:`fred.model.system.params.default_params`) reads the embedded default
timing file; the figures below are only the fallback of an explicitly constructed
``SwitchTiming()``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from fred.contract.timing import TimingFile, TimingFileError, load_timing

from .bit_errors import curve_from_section

__all__ = ["SwitchTiming", "ZERO_SWITCH_TIMING", "SWITCH_CLOCK_HZ", "switch_timing", "AllToAllTiming",
           "all_to_all_timing", "A2A_METHODS", "NO_A2A_SECTION"]

#: the switch's all-to-all methods a timing file measures (schema 5): phases compiled ahead by the
#: routing compiler and run back to back from the phase table, or routed online round by round
A2A_METHODS = ("precompiled", "online")
#: what the model says when the timing file has no all-to-all figures
NO_A2A_SECTION = "line rate (timing file has no all_to_all section)"


@dataclass(frozen=True)
class AllToAllTiming:
    """The switch's measured all-to-all throughput for one method (the timing file's
    ``all_to_all`` section):

    * ``uniform`` -- flits per cycle per port of a uniform all-to-all (1 = line rate);
    * ``skewed`` -- a skewed all-to-all (destinations Zipf of exponent ``zipf_exponent``) as a
      fraction of its bound (the busiest port's flits at one flit per cycle);
    * ``config_cycles_per_phase`` x phases -- the configuration cost of a precompiled all-to-all
      (``phases_uniform`` phases on ``ports`` ports; 0 for online routing, whose rounds are inside
      its throughput); ``by_ports``: the section's figures per switch size (port count -> methods).
    """
    method: str
    uniform: float
    skewed: float
    config_cycles_per_phase: float = 0.0
    phases_uniform: float = 0.0
    ports: int = 0
    zipf_exponent: float = 1.0
    methods: tuple = ()
    by_ports: dict | None = field(default=None, compare=False, repr=False)
    source: str = ""
    #: the whole section and its file (another method's figures are read from them)
    section: dict | None = field(default=None, compare=False, repr=False)
    path: str = field(default="", compare=False, repr=False)

    def fraction(self, skewed: bool) -> float:
        """The share of line rate an all-to-all moves at: the skewed figure for uneven traffic
        (its time = bound time / fraction), else the uniform one."""
        return self.skewed if skewed else self.uniform

    def phases(self, k: int) -> int:
        """Configuration phases of a uniform all-to-all among ``k`` switch ports: the measured
        count at that port count (``by_ports``) if given, else ``phases_uniform`` scaled by the
        permutations an all-to-all needs (``k - 1`` of ``ports - 1``)."""
        if not self.config_cycles_per_phase or k < 2:
            return 0
        rec = ((self.by_ports or {}).get(str(k)) or {}).get(self.method)     # by_ports: port count -> methods
        n = rec.get("phases_uniform") if isinstance(rec, dict) else None
        if isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) and n >= 0:
            return int(math.ceil(n))
        if self.ports < 2:
            return k - 1
        return int(math.ceil(self.phases_uniform * (k - 1) / (self.ports - 1)))

    def describe(self) -> str:
        cfg = (f", {self.config_cycles_per_phase:g} configuration cycles per phase"
               if self.config_cycles_per_phase else "")
        return (f"{self.method} routing: uniform {self.uniform:g} flits/cycle/port, skewed (Zipf "
                f"{self.zipf_exponent:g}) {self.skewed:g} of bound{cfg} ({self.ports}-port switch; {self.source})")


# ours: the clock of the switch RTL (the paper gives none); the timing file gives cycles.
# The figures below are only the fallback of an explicitly constructed ``SwitchTiming()``:
# the default parameter set reads the measured timing file (fred.model.system.params). A FRED_3(12) fabric is
# R(6) -> FRED_3(6) -> D(6): R, R, FRED_3(3) (3 cell stages), D, D ~ 7 registered µSwitch
# stages; plus input-port buffer, header decode and output register ~ 16 cycles per traversal
# of one logical switch. Clock 1 GHz (the paper gives none). The cells are fully pipelined, one
# beat per cycle per port in every mode (FRED-SPEC §2, ours), so in-switch collectives run at
# link rate: 1.0 beat/cycle/port.
SWITCH_LATENCY_CYCLES = 16
SWITCH_CLOCK_HZ = 1.0e9
SWITCH_BEATS_PER_CYCLE_PER_PORT = 1.0
SWITCH_TIMING_SOURCE = "ours: documented default (16 cycles at 1 GHz, 1 beat/cycle/port); not yet measured"


@dataclass(frozen=True)
class SwitchTiming:
    """Timing of one logical switch traversal.

    * traversal latency = ``latency_cycles / clock_hz`` seconds, added per switch on a path;
    * in-switch collective bandwidth = link bandwidth x ``beats_per_cycle_per_port`` (a flow that
      reduces or multicasts inside a switch is capped at that rate on the switch's ports);
    * ``source`` says where the numbers come from (a timing file path, or "ours: ...").
    """

    latency_cycles: float = SWITCH_LATENCY_CYCLES
    clock_hz: float = SWITCH_CLOCK_HZ
    beats_per_cycle_per_port: float = SWITCH_BEATS_PER_CYCLE_PER_PORT
    source: str = SWITCH_TIMING_SOURCE
    #: cycles the control unit needs to switch to a new phase's configuration (measured by the
    #: switch bench); paid once by every in-switch collective flow, which is a phase of its own;
    #: a preempted flow loses two (the fabric drains and reloads to the higher phase, and again
    #: back: :attr:`resume_delay_s`)
    phase_switch_cycles: float = 0.0
    #: cycles from a higher-priority phase being ready to its first output while a lower-priority
    #: phase holds the fabric (the round in flight drains, then the new configuration loads;
    #: measured by the switch bench, worst case)
    preemption_cycles: float = 0.0
    #: the same on an idle switch with a new configuration (measured): the part of a preemption
    #: that every phase pays anyway; a preempting flow pays the rest (:attr:`preemption_delay_s`)
    activation_cycles: float = 0.0
    #: the switch forwards a packet once its head has arrived (virtual cut-through: the RTL
    #: since issue 14); False = store-and-forward, each switch hop then adds one packet's time
    #: on its incoming link (``Topology.store_forward_bytes``)
    cut_through: bool = False
    #: Go-Back-N goodput vs packet error probability measured through the switch RTL:
    #: ((q, goodput), ...) from the timing file's ``link_faults`` (:mod:`fred.model.system.bit_errors`;
    #: empty: not measured, so no bit-error derating)
    fault_curve: tuple = ()
    #: the all-to-all throughput measured through the switch RTL for the chosen method
    #: (:class:`AllToAllTiming`; None: not measured, all-to-all at line rate)
    all_to_all: AllToAllTiming | None = None

    @property
    def all_to_all_source(self) -> str:
        """What an all-to-all on a FRED fabric moves at: the measured figures, or line rate."""
        return self.all_to_all.describe() if self.all_to_all else NO_A2A_SECTION

    def with_all_to_all_method(self, method: str) -> "SwitchTiming":
        """This timing with the all-to-all figures of ``method`` (``precompiled``, ``online``);
        ValueError naming it when the timing file has no such figures."""
        m = str(method).strip().lower()
        a = self.all_to_all
        if a is None:
            raise ValueError(f"all-to-all method {method!r}: the switch timing ({self.source}) has no "
                             f"all_to_all section (a timing file of schema 5 from `fred characterize` has)")
        if m not in a.methods:
            raise ValueError(f"unknown all-to-all method {method!r}; this timing file measures "
                             f"{', '.join(a.methods)}")
        if m == a.method:
            return self
        return replace(self, all_to_all=_a2a_figures(a.section, a.path, m, a.source))

    def __post_init__(self):
        if not self.latency_cycles >= 0:
            raise ValueError(f"switch latency_cycles must be >= 0, got {self.latency_cycles!r}")
        if not self.clock_hz > 0:
            raise ValueError(f"switch clock_hz must be > 0, got {self.clock_hz!r}")
        if not self.phase_switch_cycles >= 0:
            raise ValueError(f"switch phase_switch_cycles must be >= 0, got {self.phase_switch_cycles!r}")
        if not self.preemption_cycles >= 0:
            raise ValueError(f"switch preemption_cycles must be >= 0, got {self.preemption_cycles!r}")
        if not self.activation_cycles >= 0:
            raise ValueError(f"switch activation_cycles must be >= 0, got {self.activation_cycles!r}")
        if not self.beats_per_cycle_per_port > 0:
            raise ValueError(f"switch beats_per_cycle_per_port must be > 0, got {self.beats_per_cycle_per_port!r}")

    @property
    def latency_s(self) -> float:
        """Switch traversal latency in seconds."""
        return self.latency_cycles / self.clock_hz

    @property
    def phase_switch_s(self) -> float:
        """Phase (configuration) switch latency in seconds."""
        return self.phase_switch_cycles / self.clock_hz

    @property
    def preemption_delay_s(self) -> float:
        """What preempting costs a flow over an unobstructed start, in seconds: the measured
        preemption latency less the activation every new phase pays (checked against the RTL by
        tests/model/test_model_vs_rtl_overlap.py)."""
        return max(0.0, self.preemption_cycles - self.activation_cycles) / self.clock_hz

    @property
    def resume_delay_s(self) -> float:
        """What being preempted costs a flow, in seconds: two phase switches (to the higher
        phase and back; the fabric idles during both), as the RTL shows."""
        return 2.0 * self.phase_switch_s

    def collective_bandwidth(self, link_bw: float) -> float:
        """In-switch collective bandwidth on a port of bandwidth ``link_bw`` (B/s)."""
        return link_bw * self.beats_per_cycle_per_port


ZERO_SWITCH_TIMING = SwitchTiming(0, 1.0e9, 1.0, "ours: ideal switch (no traversal latency), as in ASTRA-sim analytical")


def _activation_cycles(tf: TimingFile) -> float:
    """Activation of a new configuration on an idle switch (summary, else the switch section)."""
    v = tf.summary.get("activation_cycles")
    if v is None:
        v = ((tf.data.get("switch") or {}).get("activation_cycles") or {}).get("new_config")
    return float(v or 0)


def switch_timing(tf: TimingFile | None = None, clock_hz: float | None = None):
    """:class:`SwitchTiming` from a timing file (default: the embedded one).

    ``clock_hz`` defaults to :data:`SWITCH_CLOCK_HZ` (the paper gives no clock;
    the RTL figures are in cycles). The ``source`` names the file, its revision and the figures.
    """
    tf = load_timing() if tf is None else tf
    a2a = all_to_all_timing(tf)
    clock = SWITCH_CLOCK_HZ if clock_hz is None else float(clock_hz)
    if not clock > 0:
        raise ValueError(f"clock_hz {clock_hz!r} must be > 0")
    return SwitchTiming(latency_cycles=tf.latency_cycles, clock_hz=clock,
                               beats_per_cycle_per_port=tf.beats_per_cycle_per_port,
                               phase_switch_cycles=float(tf.summary.get("phase_switch_cycles") or 0),
                               preemption_cycles=float(tf.summary.get("preemption_cycles_max") or 0),
                               activation_cycles=_activation_cycles(tf),
                               cut_through=tf.cut_through,
                               fault_curve=curve_from_section(tf.link_faults) if tf.link_faults else (),
                               all_to_all=a2a, source=f"timing file {tf.describe()}")


def _bad(path, key, value, problem):
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:36] + "..."
    return TimingFileError(f"timing file {path}: field all_to_all.{key} = {shown} {problem}; regenerate it "
                           f"with `fred characterize`")


def _a2a_num(sec, key, path, where, low, high, low_open=False, whole=False):
    v = sec.get(key) if isinstance(sec, dict) else None
    if v is None:
        raise TimingFileError(f"timing file {path}: missing field all_to_all.{where}{key}; regenerate it "
                              f"with `fred characterize`")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _bad(path, where + key, v, "is not a finite number")
    if v < low or (low_open and v <= low) or v > high:
        raise _bad(path, where + key, v, f"must be in {'(' if low_open else '['}{low:g}, {high:g}]")
    if whole and v != int(v):
        raise _bad(path, where + key, v, "is not a whole number")
    return float(v)


def _a2a_figures(sec: dict, path: str, method: str, source: str) -> AllToAllTiming:
    """The checked figures of ``method`` in section ``sec`` (see :func:`all_to_all_timing`)."""
    methods = sec["methods"]
    m = methods[method]
    w = f"methods.{method}."
    uni = _a2a_num(m, "uniform_flits_per_cycle_per_port", path, w, 0, 1, low_open=True)
    skew = _a2a_num(m, "skewed_fraction_of_bound", path, w, 0, 1, low_open=True)
    cfg = phases = 0.0
    if "config_cycles_per_phase" in m or "phases_uniform" in m:
        cfg = _a2a_num(m, "config_cycles_per_phase", path, w, 0, 1e6)
        phases = _a2a_num(m, "phases_uniform", path, w, 0, 1e6, whole=True)
    t = AllToAllTiming(method=method, uniform=uni, skewed=skew, config_cycles_per_phase=cfg, phases_uniform=phases,
                       ports=int(sec["ports"]), zipf_exponent=float(sec["zipf_exponent"]),
                       methods=tuple(methods), by_ports=sec.get("by_ports") if isinstance(sec.get("by_ports"), dict)
                       else None, source=source, section=sec, path=path)
    return t


def all_to_all_timing(tf: TimingFile, method: str | None = None) -> AllToAllTiming | None:
    """The ``all_to_all`` section of timing file ``tf`` (schema 5) for ``method`` (default: the
    section's ``default_method``), each field checked (a bad one: one :class:`TimingFileError`
    line naming it); None when the file has no such section (schema 4 and older: the model then
    keeps line rate). Read from the raw document, so a reader that does not know the section
    still passes it on."""
    sec = tf.data.get("all_to_all")
    if sec is None:
        return None
    path = tf.path
    if not isinstance(sec, dict):
        raise TimingFileError(f"timing file {path}: field all_to_all is not an object; regenerate it with "
                              f"`fred characterize`")
    _a2a_num(sec, "zipf_exponent", path, "", 0, 16)
    _a2a_num(sec, "ports", path, "", 2, 4096, whole=True)
    methods = sec.get("methods")
    if not isinstance(methods, dict) or not methods:
        raise _bad(path, "methods", methods, "must be an object of methods (precompiled, online)")
    for name in methods:
        if name not in A2A_METHODS:
            raise _bad(path, "methods", name, f"is not a method: expected {' or '.join(A2A_METHODS)}")
        if not isinstance(methods[name], dict):
            raise _bad(path, f"methods.{name}", methods[name], "is not an object")
    default = sec.get("default_method", A2A_METHODS[0])
    if default not in methods:
        raise _bad(path, "default_method", default, f"is not one of the methods measured ({', '.join(methods)})")
    chosen = default if method is None else str(method).strip().lower()
    if chosen not in methods:
        raise ValueError(f"unknown all-to-all method {method!r}; timing file {path} measures {', '.join(methods)}")
    for name in methods:                      # every method's figures checked, not just the chosen
        _a2a_figures(sec, path, name, "")
    by = str(sec.get("measured_by") or "").strip()
    return _a2a_figures(sec, path, chosen, f"timing file {path}" + (f", measured by {by}" if by else ""))

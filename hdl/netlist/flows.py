"""Flows and compound collectives for FRED_m(P).

A :class:`Flow` sums the data arriving on all its input ports and delivers the sum to every one
of its output ports (FRED-SPEC §3). Unicast (1 -> 1), Reduce (i -> 1), Multicast (1 -> j) and
All-Reduce (i -> the same i) are one flow each; anything else with several inputs and several
outputs is a *general* flow (also one flow). Flows active at the same time must be disjoint in
input ports and in output ports.

Compound collectives are sequences of :class:`Phase` s (one fabric configuration each):

=================  ========================================================================
all-reduce         1 phase: one flow group -> group
reduce             1 phase: group -> root
multicast          1 phase: root -> group  (``broadcast`` is the same)
reduce-scatter     i phases; phase j: group -> group[j] (delivers slice j to member j)
all-gather         i phases; phase j: group[j] -> group (member j's slice to everyone)
all-to-all         i-1 phases; phase s: group[j] -> group[(j+s) % i] for every j (permutation)
gather             i phases; phase j: group[j] -> root
scatter            i phases; phase j: root -> group[j]
=================  ========================================================================

Port-set syntax: ``"0,1,2"``, ranges ``"0-3"``, mixed ``"0-3,6"``; a flow is ``"INS>OUTS"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .structure import MAX_PORTS

__all__ = [
    "Flow", "Phase", "parse_ports", "parse_flow", "format_ports", "validate_flows", "COLLECTIVES",
    "expand", "all_reduce", "reduce", "multicast", "broadcast", "reduce_scatter", "all_gather",
    "all_to_all", "gather", "scatter",
]


#: a port number as written (ASCII digits; more than 30 is far out of range, and int() refuses
#: thousands)
_PORT = re.compile(r"\s*[0-9]{1,30}\s*", re.ASCII)


def parse_ports(text: str, what: str = "port set") -> frozenset:
    """``"0-3,6"`` -> frozenset({0, 1, 2, 3, 6}). One-line ValueError naming the bad text: an
    empty item, a port that is not a number, negative or beyond :data:`MAX_PORTS` - 1, an empty
    range, or a port named twice (``"0,0"``, ``"0-3,2"``); TypeError when ``text`` is not a
    string."""
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a string like '0-3,6', not {type(text).__name__} {text!r}")
    items = [t.strip() for t in text.split(",")]
    if not text.strip():
        raise ValueError(f"{what} is empty")
    ports = set()
    for item in items:
        if not item:
            raise ValueError(f"{what} {text!r} has an empty item")
        lo, sep, hi = item.partition("-")
        if not all(_PORT.fullmatch(t) for t in ((lo, hi) if sep else (lo,))):
            raise ValueError(f"{what} {text!r}: {item!r} is not a port number or range like 0-3")
        a = int(lo)
        b = int(hi) if sep else a
        if a < 0 or b < 0:
            raise ValueError(f"{what} {text!r}: port {min(a, b)} is negative")
        if max(a, b) >= MAX_PORTS:
            raise ValueError(f"{what} {text!r}: port {max(a, b)} is out of range (a fabric has at "
                             f"most {MAX_PORTS} ports, 0..{MAX_PORTS - 1})")
        if b < a:
            raise ValueError(f"{what} {text!r}: range {item!r} is empty (end below start)")
        twice = ports.intersection(range(a, b + 1))
        if twice:
            raise ValueError(f"{what} {text!r} names port {min(twice)} twice")
        ports.update(range(a, b + 1))
    return frozenset(ports)


def format_ports(ports) -> str:
    """Inverse of :func:`parse_ports`; runs of 3 or more become ranges (``0-3,6``)."""
    ps = sorted(ports)
    out, i = [], 0
    while i < len(ps):
        j = i
        while j + 1 < len(ps) and ps[j + 1] == ps[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{ps[i]}-{ps[j]}")
        else:
            out.extend(str(p) for p in ps[i:j + 1])
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True)
class Flow:
    """Sum of the data on ``inputs``, delivered to every port of ``outputs``."""

    inputs: frozenset
    outputs: frozenset

    def __post_init__(self):
        object.__setattr__(self, "inputs", frozenset(self.inputs))
        object.__setattr__(self, "outputs", frozenset(self.outputs))
        for side, ports in (("input", self.inputs), ("output", self.outputs)):
            if not ports:
                raise ValueError(f"flow {self._text()!r} has no {side} ports")
            for p in ports:
                if not isinstance(p, int) or isinstance(p, bool) or p < 0:
                    raise ValueError(f"flow {self._text()!r}: {side} port {p!r} is not a port number")

    def _text(self):
        try:
            return f"{format_ports(self.inputs)}>{format_ports(self.outputs)}"
        except TypeError:
            return f"{set(self.inputs)}>{set(self.outputs)}"

    @classmethod
    def parse(cls, text: str) -> "Flow":
        return parse_flow(text)

    @property
    def kind(self) -> str:
        """unicast, reduce, multicast, all-reduce or general."""
        ni, no = len(self.inputs), len(self.outputs)
        if ni == 1 and no == 1:
            return "unicast"
        if no == 1:
            return "reduce"
        if ni == 1:
            return "multicast"
        if self.inputs == self.outputs:
            return "all-reduce"
        return "general"

    def __str__(self):
        return self._text()

    def to_json(self):
        return {"inputs": sorted(self.inputs), "outputs": sorted(self.outputs), "kind": self.kind}


def parse_flow(text) -> Flow:
    """``"0,1,2>0,1,2"`` / ``"0-3>4"`` -> :class:`Flow`. Accepts a Flow unchanged."""
    if isinstance(text, Flow):
        return text
    if not isinstance(text, str):
        raise ValueError(f"flow {text!r} is not a string like '0,1>2'")
    if text.count(">") != 1:
        raise ValueError(f"flow {text!r} must have the form INPUTS>OUTPUTS, e.g. '0,1,2>0,1,2' or '0-3>4'")
    ins, outs = text.split(">")
    if not ins.strip():
        raise ValueError(f"flow {text!r} has no input ports")
    if not outs.strip():
        raise ValueError(f"flow {text!r} has no output ports")
    return Flow(parse_ports(ins, f"flow {text!r} inputs"), parse_ports(outs, f"flow {text!r} outputs"))


def _name(i, f):
    return f"flow #{i} '{f}'"


def validate_flows(flows, P: int) -> tuple:
    """Parse (strings allowed) and check a set of concurrent flows against P ports.

    Returns the tuple of :class:`Flow`. Raises a one-line ValueError naming the port and the
    flow(s): port out of range, or a port used by two flows on the same side.
    """
    flows = tuple(parse_flow(f) for f in flows)
    if not flows:
        raise ValueError("no flows given")
    used = ({}, {})
    for i, f in enumerate(flows):
        for side, ports in ((0, f.inputs), (1, f.outputs)):
            word = ("input", "output")[side]
            for p in sorted(ports):
                if p >= P:
                    raise ValueError(f"{_name(i, f)}: {word} port {p} is out of range for {P} ports (0..{P - 1})")
                if p in used[side]:
                    j = used[side][p]
                    raise ValueError(f"{word} port {p} is used by both {_name(j, flows[j])} and {_name(i, f)}")
                used[side][p] = i
    return flows


@dataclass(frozen=True)
class Phase:
    """One fabric configuration: a label and the flows active together."""

    label: str
    flows: tuple = field(default_factory=tuple)

    def __post_init__(self):
        object.__setattr__(self, "flows", tuple(parse_flow(f) for f in self.flows))

    def __str__(self):
        return f"{self.label}: " + "  ".join(str(f) for f in self.flows)

    def to_json(self):
        return {"label": self.label, "flows": [str(f) for f in self.flows]}


def _group(group, what="group"):
    if isinstance(group, str):
        g = sorted(parse_ports(group, what))
    else:
        g = list(group)
        if len(set(g)) != len(g):
            dup = next(p for p in g if g.count(p) > 1)
            raise ValueError(f"{what} {g!r} lists port {dup} twice")
    if not g:
        raise ValueError(f"{what} is empty")
    if len(g) < 2:
        raise ValueError(f"{what} {format_ports(g)} has one port: a collective needs at least 2 "
                         f"(use a flow for a single transfer)")
    return g


def _root(root, name):
    if root is None:
        raise ValueError(f"{name} needs a root port (--root)")
    if not isinstance(root, int) or isinstance(root, bool) or root < 0:
        raise ValueError(f"{name} root {root!r} is not a port number")
    return root


def all_reduce(group) -> list:
    g = _group(group)
    return [Phase("all-reduce", (Flow(g, g),))]


def reduce(group, root) -> list:
    g, r = _group(group), _root(root, "reduce")
    return [Phase(f"reduce -> {r}", (Flow(g, {r}),))]


def multicast(root, group) -> list:
    g, r = _group(group), _root(root, "multicast")
    return [Phase(f"multicast {r} ->", (Flow({r}, g),))]


broadcast = multicast


def reduce_scatter(group) -> list:
    g = _group(group)
    return [Phase(f"reduce-scatter step {j}: slice {j} -> {p}", (Flow(g, {p}),)) for j, p in enumerate(g)]


def all_gather(group) -> list:
    g = _group(group)
    return [Phase(f"all-gather step {j}: slice of {p} -> all", (Flow({p}, g),)) for j, p in enumerate(g)]


def all_to_all(group) -> list:
    g = _group(group)
    n = len(g)
    return [Phase(f"all-to-all step {s}: shift {s}", tuple(Flow({g[j]}, {g[(j + s) % n]}) for j in range(n)))
            for s in range(1, n)]


def gather(group, root) -> list:
    g, r = _group(group), _root(root, "gather")
    return [Phase(f"gather step {j}: {p} -> {r}", (Flow({p}, {r}),)) for j, p in enumerate(g)]


def scatter(root, group) -> list:
    g, r = _group(group), _root(root, "scatter")
    return [Phase(f"scatter step {j}: {r} -> {p}", (Flow({r}, {p}),)) for j, p in enumerate(g)]


#: collective name -> (function, needs root)
COLLECTIVES = {
    "all-reduce": (all_reduce, False),
    "reduce": (reduce, True),
    "multicast": (multicast, True),
    "broadcast": (broadcast, True),
    "reduce-scatter": (reduce_scatter, False),
    "all-gather": (all_gather, False),
    "all-to-all": (all_to_all, False),
    "gather": (gather, True),
    "scatter": (scatter, True),
}


def expand(name: str, group, root=None) -> list:
    """Expand a collective over ``group`` (port list or ``"0-7"``) into a list of :class:`Phase`."""
    key = str(name).lower().replace("_", "-")
    if key not in COLLECTIVES:
        raise ValueError(f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}")
    fn, needs_root = COLLECTIVES[key]
    if needs_root:
        if key in ("reduce", "gather"):
            return fn(group, root)
        return fn(root, group)
    if root is not None:
        raise ValueError(f"{key} takes no root (got root {root})")
    return fn(group)

"""The result of the routing compiler: :class:`RoutingResult` (every cell's mode, each flow's
middle copies, reduction tree and broadcast cells), its JSON form (``fred route --json``) and
its text form (``fred route``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from fred.hdl.netlist import format_ports
from fred.hdl.netlist import CellAddr, idle_mode, mode_str, mode_to_json, path_name
from fred.hdl.netlist import Netlist

__all__ = ["ReduceStep", "RoutingResult"]


@dataclass(frozen=True)
class ReduceStep:
    """One add of a flow's reduction tree: ``cell`` computes in0 + in1 = ``left`` + ``right``
    (the sets of fabric input ports already summed into each operand), in pipeline ``column``."""

    cell: CellAddr
    column: int
    left: frozenset
    right: frozenset

    def __str__(self):
        return f"{self.cell}: [{format_ports(self.left)}] + [{format_ports(self.right)}]"


@dataclass
class RoutingResult:
    """The compiled routing of one phase (a set of concurrent flows) on FRED_m(P).

    Fields
    ------
    P, middle, flows : the problem, FRED_middle(P) (``flows`` a tuple of :class:`Flow`, indexed
        as given)
    cell_modes : dict CellAddr -> mode for *every* cell of the fabric (idle modes for unused ones)
    copies : per flow, dict instance path -> middle copy the flow takes there (JSON
        ``middle_copies``)
    reductions : per flow, list of :class:`ReduceStep` in pipeline order (column, then path)
    trees : per flow, the reduction tree as a nested expression string, e.g. ``((0+1)+2)``
    broadcasts : per flow, the cells that copy the flow's stream to both outputs
    output_flow : dict fabric output port -> flow index (unused ports absent)
    input_flow : dict fabric input port -> flow index
    stages : cells on every input -> output path
    netlist : the flattened structure (:class:`fred.hdl.netlist.structure.Netlist`) the modes are for
    """

    P: int
    middle: int
    flows: tuple
    cell_modes: dict
    copies: list
    reductions: list
    trees: list
    broadcasts: list
    output_flow: dict
    input_flow: dict
    stages: int
    netlist: Netlist = field(repr=False, compare=False, default=None)

    # -- views ---------------------------------------------------------------------------------
    def used_cells(self):
        net = self.netlist
        return [c for c in net.cells if self.cell_modes[c] != idle_mode(net.kind[c])]

    def to_dict(self):
        net = self.netlist
        return {
            "ports": self.P,
            "middle": self.middle,
            "stages": self.stages,
            "flows": [{"index": i, "flow": str(f), **f.to_json(),
                       "middle_copies": {path_name(p): k for p, k in sorted(self.copies[i].items())},
                       "reduction_tree": self.trees[i],
                       "reductions": [{"cell": str(s.cell), "column": s.column,
                                       "left": sorted(s.left), "right": sorted(s.right)}
                                      for s in self.reductions[i]],
                       "broadcasts": [str(c) for c in self.broadcasts[i]]}
                      for i, f in enumerate(self.flows)],
            "cells": [{"cell": str(c), "path": list(c.path), "stage": c.stage, "index": c.index,
                       "kind": net.kind[c], "column": net.column[c],
                       "mode": mode_to_json(self.cell_modes[c])} for c in net.cells],
        }

    def to_json(self, indent=None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def format(self, show_idle=False) -> str:
        net = self.netlist
        L = [f"FRED_{self.middle}({self.P}): {self.stages} stages, {len(net.cells)} cells, "
             f"{len(self.flows)} flow{'s' if len(self.flows) != 1 else ''}"]
        for i, f in enumerate(self.flows):
            mids = " ".join(f"{path_name(p)}:{k}" for p, k in sorted(self.copies[i].items(), key=lambda x: (len(x[0]), x[0])))
            L.append(f"  flow #{i} {f.kind:<10} {str(f):<16} sum {self.trees[i]}")
            if mids:
                L.append(f"           middle copies  {mids}")
        for d in range(net.depth + 1):
            paths = [p for p in net.instances if len(p) == d]
            Pd = net.instances[paths[0]]
            L.append(f"level {d} ({len(paths)} instance{'s' if len(paths) > 1 else ''} of {Pd} ports)")
            idle = 0
            for p in paths:
                for c in net.cells_of(p):
                    mode = self.cell_modes[c]
                    if mode == idle_mode(net.kind[c]) and not show_idle:
                        idle += 1
                        continue
                    L.append(f"  {str(c):<16} {mode_str(mode)}{self._marks(c)}")
            if idle:
                L.append(f"  ({idle} idle cell{'s' if idle > 1 else ''} not shown)")
        return "\n".join(L)

    def _marks(self, c):
        tags = []
        for i in range(len(self.flows)):
            if any(s.cell == c for s in self.reductions[i]):
                tags.append(f"REDUCE #{i}")
            if c in self.broadcasts[i]:
                tags.append(f"BCAST #{i}")
        return ("   [" + ", ".join(tags) + "]") if tags else ""


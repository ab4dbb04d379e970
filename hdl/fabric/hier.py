"""Hierarchical Verilog: every distinct module emitted once, instantiated where it is used.

The *flat* form (``emit(Fabric(...))``) elaborates every cell, and every lane of every adder,
as its own Verilog module; the *shared* form (:func:`fred.hdl.fabric.recursive.fabric_verilog_text`,
``form="shared"``) converts each cell kind once. The *hierarchical* form (``form="hier"``) goes
all the way, so that generation time and text grow with the number of distinct modules, not
with lanes x cells:

* the **lane slice** -- one element's adder (:class:`~fred.hdl.adders.ElementAdder`, the only
  per-lane logic of a cell: the cell's registers and muxes are whole-beat vector statements
  whose text does not grow with the lanes) -- is the module ``fred_add_<dtype>``, instantiated
  once per lane by :class:`LaneAdders` (the cell's vector adder in this form);
* each **cell kind** is one module per parameter set (as in the shared form);
* each **sub-fabric size** is one module (``fred_fabric_m<m>_p<P>_l<lanes>_<dtype>``) that
  every middle copy of that size instantiates;
* payloads between modules are plain ``lanes x width``-bit vectors (lane 0 in the low bits,
  the same bits as the ``ArrayLayout``), so no per-lane debug alias is written for them.

Behaviour is the same as the flat form (same ports, same bits, same cycle-level behaviour):
tests/hdl/test_hier.py runs the fabric benches on both forms and proves the two netlists
equivalent with yosys ``equiv_*`` at a small width.

:func:`emit_modules` emits a top component and then every module the registry collects while
they are emitted (a sub-fabric registers its cells, a cell its lane adder), in sorted order.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal, Shape, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fred.hdl.adders import ElementAdder, adder_latency
from fred.hdl.dtypes import get_dtype

__all__ = ["LaneAdders", "lane_module_name", "plain_signature", "instantiate", "emit_modules",
           "FORMS", "AUTO_HIER_LANES", "resolve_form", "input_bits"]

#: Verilog forms of the fabric and the switch: flat (every instance its own module), shared
#: (one module per cell kind), hier (one module per cell kind, lane adder and sub-fabric size)
FORMS = ("flat", "shared", "hier")
#: ``fred verilog fabric|switch --form auto`` (the default) is the hierarchical form above this
#: many lanes, else the established one (fabric: shared, switch: flat), so the narrow outputs
#: of ``make verilog`` stay what they were
AUTO_HIER_LANES = 16


def resolve_form(target: str, lanes: int, form: str = "auto") -> str:
    """The Verilog form ``fred verilog TARGET`` writes for ``--form`` (``auto`` resolved)."""
    if form != "auto":
        if form not in FORMS:
            raise ValueError(f"unknown Verilog form {form!r}; known: auto, {', '.join(FORMS)}")
        return form
    if lanes > AUTO_HIER_LANES:
        return "hier"
    return "shared" if target == "fabric" else "flat"


def lane_module_name(dtype) -> str:
    """Module name of the lane slice (one element adder) for ``dtype``."""
    return f"fred_add_{get_dtype(dtype).name}"


def plain_signature(signature: wiring.Signature) -> wiring.Signature:
    """``signature`` with every port of a layout shape (stream payloads, config structs) a plain
    vector of the same width (same member names, so the Verilog port names are the same)."""
    members = {}
    for name, member in signature.members.items():
        flow = In if member.flow == In else Out
        if member.is_signature:
            inner = member.signature.flip() if member.flow == In else member.signature
            new = flow(plain_signature(inner))
        else:
            new = flow(Shape.cast(member.shape))
        members[name] = new.array(*member.dimensions) if member.dimensions else new
    return wiring.Signature(members)


class LaneAdders(wiring.Component):
    """``lanes`` instances of the lane-slice module ``fred_add_<dtype>`` side by side: the
    hierarchical form of :class:`~fred.hdl.adders.VectorAdder` (same ports and behaviour, with
    ``a``, ``b``, ``y`` plain ``lanes x width``-bit vectors, lane 0 in the low bits).
    ``registry`` (module name -> component) receives the element adder to emit once."""

    def __init__(self, dtype, lanes, registry: dict):
        self.dtype = get_dtype(dtype)
        self.lanes = lanes
        self.latency = adder_latency(self.dtype)
        self._registry = registry
        w = self.dtype.width * lanes
        super().__init__({"a": In(w), "b": In(w), "en": In(1), "y": Out(w)})

    def elaborate(self, platform):
        m = Module()
        name = lane_module_name(self.dtype)
        if name not in self._registry:
            self._registry[name] = ElementAdder(self.dtype)
        w = self.dtype.width
        for i in range(self.lanes):
            lo, hi = i * w, (i + 1) * w
            m.submodules[f"lane{i}"] = Instance(
                name, i_clk=ClockSignal("sync"), i_rst=ResetSignal("sync"),
                i_a=self.a[lo:hi], i_b=self.b[lo:hi], i_en=self.en, o_y=self.y[lo:hi])
        return m


def input_bits(component) -> int:
    """Input port bits of ``component`` (Amaranth's netlist holds at most ``2**16 - 1`` per
    module: :data:`fred.hdl.fabric.recursive.MAX_MODULE_PORT_BITS`)."""
    sig = component.signature
    return sum(len(Value.cast(value)) for _, member, value in sig.flatten(sig.create())
               if member.flow == In)


def instantiate(mod, name: str, component, module: str, registry: dict, signature=None):
    """Add an ``Instance`` of ``module`` to ``mod`` as submodule ``name``, register
    ``component`` as that module's body (the first one registered is emitted), and return an
    interface with ``signature`` (default: the component's) wired to the instance's ports."""
    registry.setdefault(module, component)
    component._MustUse__silence = True  # only its class, parameters and ports are used
    sig = component.signature if signature is None else signature
    intf = wiring.PureInterface(sig, path=(name,))
    kwargs = {"i_clk": ClockSignal("sync"), "i_rst": ResetSignal("sync")}
    for path, member, value in sig.flatten(intf):
        port = "__".join(str(x) for x in path)
        kwargs[("i_" if member.flow == In else "o_") + port] = Value.cast(value)
    mod.submodules[name] = Instance(module, **kwargs)
    return intf


def emit_modules(component, name: str, registry: dict, progress=None) -> str:
    """Verilog of ``component`` (top module ``name``) followed by every module of ``registry``
    (sorted by name), including those registered while the registry's own modules are emitted.
    ``progress(what)`` (optional) is called before each module."""
    from fred.hdl.verilog import emit

    if progress:
        progress(f"module {name}")
    top = emit(component, name)
    texts = {}
    while True:
        todo = sorted(k for k in registry if k not in texts)
        if not todo:
            break
        for k in todo:
            if progress:
                progress(f"module {k}")
            texts[k] = emit(registry[k], k)
    return "\n".join([top] + [texts[k] for k in sorted(texts)])

"""``python -m fred.bench area-width`` (``make bench``): the area of the cells, the switch chiplets
and the switch at the chiplets' real width, as the README's table.

It runs :func:`fred.sim.characterize.area_width.width_area` -- the same function ``fred characterize
--area-lanes N`` calls for the timing file's ``area_at_width`` section -- at 256 fp16 lanes
(cells, FRED_3(12), FRED_3(10) and the 12-port switch at the design's buffer sizes) and at 320
lanes (cells and chiplets), prints the table, and rewrites the README block between
``<!-- area-width:begin -->`` and ``<!-- area-width:end -->`` with it (when run from a checkout
that has the file), so the documented figures are this code's output. yosys results are cached
per module (build cache ``area/``): the first run on a machine synthesizes every module (tens of
CPU minutes at these widths), a later one only regenerates the Verilog.

Every section is also written, as JSON, to ``build/area-width.json`` (``FRED_AREA_JSON``
overrides the path); :func:`embed` puts one of them into a timing file as its ``area_at_width``
section (how the embedded default got its own, with the revision that measured it).

When a timing file with an ``area_at_width`` section at one of these widths is given
(``FRED_TIMING_FILE``, default ``build/fred-timing.json``), each design's figures in it are
compared with this run's (rounded as the timing file writes them) and the result is printed: the README's table and the timing file come
from the same synthesis or the line says which design differs.
"""

from __future__ import annotations

import json
import os
import pathlib
import time

from fred.contract.outputs import write_atomic
from fred.contract.rounding import rounded
from fred.sim.characterize import SPEC_LOGIC_FRACTION, SPEC_SWITCH_CHIPLETS_MM2, width_area

__all__ = ["main", "table", "runs", "publish", "compare_timing_file", "embed", "KEYS"]

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "README.md"
BEGIN, END = "<!-- area-width:begin -->", "<!-- area-width:end -->"
#: (lanes, switch ports or None): the widths of the table (the issue's targets)
WIDTHS = ((256, 12), (320, None))
#: the figures compared with a timing file
KEYS = ("cells", "flipflops", "ge", "sram_bits")


def runs(widths=WIDTHS, progress=None) -> list:
    """``area_at_width`` sections, one per (lanes, switch ports) of ``widths``."""
    return [width_area(chiplets=(12, 10), middle=3, lanes=lanes, dtype="fp16", switch_ports=sw,
                       cells=True, progress=progress) for lanes, sw in widths]


def _kb(bits):
    return f"{bits / 8 / 1024:,.0f} KB" if bits else "—"


def _mm2(x):
    return f"{x:.2f}" if x else "—"


def table(sections) -> str:
    """The markdown table of ``sections`` and, for a section with a switch, the comparison with
    the design's figures."""
    out = ["| design | lanes | cells | flip-flops | GE | logic mm² | SRAM | SRAM mm² | total mm² |",
           "|---|---|---|---|---|---|---|---|---|"]
    for sec in sections:
        for name, d in sec["designs"].items():
            out.append(f"| {name} | {sec['lanes']} | {d['cells']:,} | {d['flipflops']:,} | {d['ge'] / 1e6:.2f} M | "
                       f"{_mm2(d['logic_mm2'])} | {_kb(d['sram_bits'])} | {_mm2(d['sram_mm2'])} | "
                       f"{d['total_mm2']:.2f} |")
    budget = SPEC_LOGIC_FRACTION * SPEC_SWITCH_CHIPLETS_MM2
    for sec in sections:
        chip = sec["designs"].get("FRED_3(12)")
        if chip:
            out += ["", f"At {sec['lanes']} lanes the FRED_3(12) chiplet's switching logic is **{chip['total_mm2']:.1f} "
                        f"mm²**, {100 * chip['total_mm2'] / SPEC_SWITCH_CHIPLETS_MM2:.3f}% of the design's "
                        f"{SPEC_SWITCH_CHIPLETS_MM2:,} mm² for all switch chiplets; the "
                        f"{100 * SPEC_LOGIC_FRACTION:.0f}% logic budget ({budget:,.0f} mm²) holds "
                        f"{budget / chip['total_mm2']:,.0f} of them."]
        spec = sec.get("spec")
        if not spec or not any(n.startswith("switch") for n in sec["designs"]):
            continue
        sw = next(d for n, d in sec["designs"].items() if n.startswith("switch"))
        out += ["", f"At {sec['lanes']} lanes a whole 12-port switch (fabric, control, ports and "
                    f"{_kb(sw['sram_bits'])} of buffers) comes to **{sw['total_mm2']:.1f} mm²**, "
                    f"{100 * spec['switch_share_of_spec_total']:.3f}% of the design's "
                    f"{spec['switch_chiplets_mm2']:,} mm² for all switch chiplets; the "
                    f"{100 * spec['logic_fraction_max']:.0f}% logic budget ({spec['logic_budget_mm2']:,.0f} mm²) "
                    f"holds the logic of {spec['switches_in_logic_budget']:,.0f} such switches."]
    s0 = sections[0]
    out += ["", f"Conversions (in the timing file's `sources`): 1 GE = {s0['ge_um2']:.6f} µm², placement "
                f"utilization {s0['placement_utilization']:.0%} (assumed), SRAM {s0['sram_um2_per_bit']:.4f} "
                f"µm²/bit; assumed, unverified: {', '.join(s0.get('assumed_unverified', [])) or 'none'}."]
    return "\n".join(out)


def compare_timing_file(path, sections) -> str:
    """One line: whether the ``area_at_width`` section of the timing file at ``path`` matches the
    section of the same lanes among ``sections`` (:data:`KEYS` of every design)."""
    p = pathlib.Path(path)
    if not p.is_file():
        return f"(no timing file at {path}: nothing compared)"
    sec = json.loads(p.read_text()).get("area_at_width")
    if not sec:
        return f"(timing file {path} has no area_at_width section: nothing compared)"
    mine = next((s for s in sections if s["lanes"] == sec["lanes"]), None)
    if mine is None:
        return f"(timing file {path}: area_at_width at {sec['lanes']} lanes, not a width of this run)"
    # the file holds numbers as write_timing writes them (fred.contract.rounding)
    diff = [f"{n}.{k}: file {sec['designs'].get(n, {}).get(k)} run {rounded(d[k])}"
            for n, d in mine["designs"].items() for k in KEYS
            if sec["designs"].get(n, {}).get(k) != rounded(d[k])]
    if diff:
        return f"timing file {path} DIFFERS from this run at {sec['lanes']} lanes: " + "; ".join(diff)
    return f"timing file {path}: area_at_width at {sec['lanes']} lanes matches this run ({len(mine['designs'])} designs)"


def publish(sections, timing_file=None) -> str:
    """Print the table of ``sections`` and the timing-file check, rewrite the README block;
    return the table."""
    text = table(sections)
    print(text)
    print(compare_timing_file(timing_file or os.environ.get("FRED_TIMING_FILE", ROOT / "build" / "fred-timing.json"),
                              sections))
    if DOC.is_file():
        doc = DOC.read_text()
        if BEGIN in doc and END in doc:
            head, rest = doc.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            write_atomic(DOC, head + BEGIN + "\n" + text + "\n" + END + tail)
            print(f"(rewrote the {BEGIN} block of {os.path.relpath(DOC, ROOT)})")
    return text


def embed(sections_json, lanes: int, timing_in, timing_out, measured_by: str) -> dict:
    """Write ``timing_out``: the timing file ``timing_in`` (``None``: the embedded default) with
    the section of ``lanes`` from ``sections_json`` (a file :func:`main` wrote) as its
    ``area_at_width``, ``measured_by`` saying which run produced it. Returns the section."""
    from fred.contract.timing import load_timing, write_timing

    sections = json.loads(pathlib.Path(sections_json).read_text())
    sec = next((s for s in sections if s["lanes"] == lanes), None)
    if sec is None:
        raise ValueError(f"{sections_json} has no section at {lanes} lanes "
                         f"(it has {', '.join(str(s['lanes']) for s in sections) or 'none'})")
    doc = dict(load_timing(timing_in).data)
    doc["area_at_width"] = dict(sec, measured_by=measured_by)
    write_timing(doc, timing_out)
    return doc["area_at_width"]


def main(argv=None) -> int:
    t0 = time.perf_counter()
    sections = runs(progress=lambda what: print(f"  [{time.perf_counter() - t0:6.0f} s] {what}", flush=True))
    out = pathlib.Path(os.environ.get("FRED_AREA_JSON") or ROOT / "build" / "area-width.json")
    write_atomic(out, json.dumps(rounded(sections), indent=1, sort_keys=True) + "\n")
    print(f"(sections written to {out})")
    publish(sections)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

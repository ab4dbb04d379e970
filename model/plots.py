"""Plots for the training model (matplotlib, Agg backend): the paper's Fig. 10 and Fig. 11 views
and the compute-regime scan. Titles stay short; what the numbers were computed with (NPU, switch
timing) goes into a footnote. Every plot is written atomically (a temporary file in the target
folder, then renamed), so a reader never sees half a PNG."""

from __future__ import annotations

import math
from pathlib import Path

from fred.contract.outputs import atomic_output

from fred.model.system import variant
from fred.model.training import PAPER_BAND

#: file types a plot can be written as (matplotlib's Agg canvas, with Pillow for jpg/tif/webp)
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".eps", ".ps", ".jpg", ".jpeg", ".tif", ".tiff",
                 ".webp")

KIND_ORDER = ("compute", "input", "dp", "mp", "pp", "stream", "offload", "ep")
KIND_LABEL = {"compute": "compute", "input": "input load", "dp": "exposed DP", "mp": "exposed MP", "pp": "exposed PP",
              "stream": "exposed weight streaming", "offload": "exposed activation offload",
              "ep": "exposed all-to-all (EP)"}
KIND_COLOR = {"compute": "#4c72b0", "input": "#8c8c8c", "dp": "#dd8452", "mp": "#55a868", "pp": "#c44e52",
              "stream": "#8172b3", "offload": "#937860", "ep": "#da8bc3"}


def _plt():
    # lazy: matplotlib takes ~0.5 s to import and only a run with --plot needs it
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path, footnote=None):
    """Footnote at the bottom left, then write ``path`` atomically (format from its suffix)."""
    plt = _plt()
    if footnote:
        fig.text(0.005, 0.005, footnote, fontsize=6.5, color="#444444", ha="left", va="bottom", wrap=True)
    fmt = Path(path).suffix[1:].lower() or "png"
    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, dpi=110, format=fmt)
    finally:
        plt.close(fig)
    return str(path)


def _parts(e):
    return {"compute": e.critical_path_compute, **{k: e.exposed.get(k, 0.0) for k in KIND_ORDER[1:]}}


def _workloads(rows):
    out = []
    for e in rows:
        if e.workload not in out:
            out.append(e.workload)
    return out


def plot_breakdown(rows, path, title="Training iteration vs the mesh (paper Fig. 10)", footnote=None):
    """Top: stacked bars per workload x fabric, normalised to that workload's mesh iteration time,
    with the model's speedup above each bar and the paper's (FRED-SPEC §7) as a black tick at
    1 / paper speedup. Bottom: exposed communication per kind in ms on a log axis, so that the
    slices too thin to see on top still show."""
    plt = _plt()
    workloads = _workloads(rows)
    fig, (ax, lx) = plt.subplots(2, 1, sharex=True, figsize=(min(12.0, 3.0 + 0.45 * len(rows)), 6.6),
                                 gridspec_kw={"height_ratios": [3, 2]})
    x = 0.0
    ticks, labels, centers = [], [], []
    seen = set()
    comm = [k for k in KIND_ORDER if k != "compute"]
    lw = 0.8 / len(comm)
    lo_ms = None
    paper_drawn = False
    for wn in workloads:
        cells = [e for e in rows if e.workload == wn]
        base = cells[0].iteration_time / (cells[0].speedup or 1.0)
        xs = []
        for e in cells:
            bottom = 0.0
            parts = _parts(e)
            for k in KIND_ORDER:
                v = parts[k] / base
                if v <= 0:
                    continue
                ax.bar(x, v, bottom=bottom, color=KIND_COLOR[k], width=0.8,
                       label=KIND_LABEL[k] if k not in seen else None)
                seen.add(k)
                bottom += v
            top = bottom
            if e.paper_speedup:
                y = 1 / e.paper_speedup
                ax.plot([x - 0.45, x + 0.45], [y, y], color="black", lw=1.6,
                        label=None if paper_drawn else "paper: 1 / speedup (FRED-SPEC §7)")
                ax.text(x, y - 0.012, f"{e.paper_speedup:.2f}", fontsize=6, ha="center", va="top",
                        bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=0.6))
                paper_drawn = True
                top = max(top, y)
            if e.speedup:
                ax.text(x, top + 0.015, f"{e.speedup:.2f}x", ha="center", va="bottom", fontsize=7)
            for i, k in enumerate(comm):
                v = parts[k] * 1e3
                if v <= 0:
                    continue
                lo_ms = v if lo_ms is None else min(lo_ms, v)
                lx.bar(x - 0.4 + (i + 0.5) * lw, v, width=lw * 0.95, color=KIND_COLOR[k])
            ticks.append(x)
            labels.append(variant(e.fabric).display)
            xs.append(x)
            x += 1
        centers.append((sum(xs) / len(xs), wn))
        x += 0.8
    ax.set_ylabel("time / mesh iteration time")
    ax.set_ylim(0, 1.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper center", ncol=4, frameon=False, bbox_to_anchor=(0.5, 1.0))
    lx.set_yscale("log")
    if lo_ms is not None:
        lx.set_ylim(bottom=max(1e-5, lo_ms / 3))
    lx.set_ylabel("exposed comm. (ms, log)")
    lx.grid(axis="y", which="major", lw=0.3, alpha=0.5)
    lx.set_xticks(ticks)
    lx.set_xticklabels(labels, rotation=45, fontsize=7)
    for cx, wn in centers:
        lx.text(cx, -0.32, wn, ha="center", va="top", transform=lx.get_xaxis_transform(), fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return _save(fig, path, footnote)


def plot_sweep(results, path, title=None, footnote=None):
    """Per strategy: stacked compute + exposed communication per sample, one bar per fabric (left
    to right as listed, the first one light), normalised to the slowest bar of the plot; the last
    fabric's speedup over the mesh above its bar."""
    from matplotlib.patches import Patch   # lazy: matplotlib only when plotting (see _plt)

    plt = _plt()
    strategies, fabrics = [], []
    for r in results:
        if r["strategy"] not in strategies:
            strategies.append(r["strategy"])
        if r["fabric"] not in fabrics:
            fabrics.append(r["fabric"])
    ok = [r for r in results if r.get("estimate") is not None]
    slowest = max(ok, key=lambda r: r["estimate"].iteration_time / r["estimate"].minibatch, default=None)
    norm = slowest["estimate"].iteration_time / slowest["estimate"].minibatch if slowest else 1.0
    fig, ax = plt.subplots(figsize=(min(13.0, 3.5 + 0.5 * len(strategies) * max(1, len(fabrics)) / 2), 4.8))
    width = 0.8 / max(1, len(fabrics))
    seen = set()
    alpha = lambda j: 1.0 if j == len(fabrics) - 1 else 0.5
    top = 0.0
    for i, s in enumerate(strategies):
        for j, f in enumerate(fabrics):
            x = i + (j - (len(fabrics) - 1) / 2) * width
            r = next((r for r in results if r["strategy"] == s and r["fabric"] == f), None)
            if r is None or r.get("estimate") is None:
                ax.text(x, 0.02, "does not fit", ha="center", fontsize=6, rotation=90)
                continue
            e = r["estimate"]
            bottom = 0.0
            for k in KIND_ORDER:
                v = _parts(e)[k] / e.minibatch / norm
                if v <= 0:
                    continue
                ax.bar(x, v, bottom=bottom, width=width * 0.95, color=KIND_COLOR[k], alpha=alpha(j),
                       edgecolor="black", linewidth=0.3)
                seen.add(k)
                bottom += v
            top = max(top, bottom)
            if j == len(fabrics) - 1 and len(fabrics) > 1 and e.speedup:
                ax.text(x, bottom + 0.01, f"{e.speedup:.2f}x", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(strategies)))
    ax.set_xticklabels([s.replace("-", "\n") for s in strategies], fontsize=6)
    if slowest:
        ax.set_ylabel(f"time per sample / slowest bar\n({slowest['strategy']} on {variant(slowest['fabric']).display}: "
                      f"{norm * 1e6:,.0f} us)", fontsize=8)
    ax.set_ylim(0, top * 1.12 + 0.02)
    if title:
        ax.set_title(title, fontsize=10)
    handles = [Patch(color=KIND_COLOR[k], label=KIND_LABEL[k]) for k in KIND_ORDER if k in seen]
    handles += [Patch(facecolor="#999999", alpha=alpha(j), edgecolor="black", linewidth=0.3,
                      label=f"{variant(f).display} ({'left' if j == 0 else 'right' if j == len(fabrics) - 1 else 'middle'})")
                for j, f in enumerate(fabrics)]
    if len(fabrics) > 1:
        handles.append(Patch(color="white", label=f"label: {variant(fabrics[-1]).display} speedup over the mesh"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return _save(fig, path, footnote)


#: one colour per fabric in line plots
FABRIC_COLOR = {"mesh": "#7f7f7f", "fred-a": "#8c564b", "fred-b": "#2ca02c", "fred-c": "#1f77b4", "fred-d": "#d62728"}
_LINESTYLES = ("-", "--", ":", "-.")


def plot_scan(r, path, title="Speedup over the mesh vs NPU speed", footnote=None):
    """One panel per workload: speedup over the mesh against k (log axis) for each FRED variant;
    the paper's value (FRED-SPEC §7) as a dotted line with its +-10% band, and a star where the
    scan reproduces it (a hollow marker at the right edge where it does not). One line style per
    samples-per-replica value."""
    plt = _plt()
    n = len(r.workloads)
    cols = 2 if n > 1 else 1
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.4 * rows + 0.5), squeeze=False)
    fabs = [f for f in r.fabrics if f != "mesh"]
    for idx, w in enumerate(r.workloads):
        ax = axes[idx // cols][idx % cols]
        for si, s in enumerate(r.samples):
            ls = _LINESTYLES[si % len(_LINESTYLES)]
            for f in fabs:
                ks, sp, _ = r.series(w, f, s)
                pts = [(k, v) for k, v in zip(ks, sp) if v is not None]
                if pts:
                    lab = variant(f).display + (f", {s:g} samples" if len(r.samples) > 1 else "")
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], ls, color=FABRIC_COLOR.get(f), lw=1.4,
                            marker=".", ms=3, label=lab)
        found = []
        for c in r.paper_cells:
            if c.workload != w:
                continue
            col = FABRIC_COLOR.get(c.fabric)
            lo, hi = c.band
            ax.axhspan(lo, hi, color=col, alpha=0.10, lw=0)
            ax.axhline(c.paper_speedup, color=col, lw=0.8, ls=":")
            if c.reached:
                ax.plot([c.k], [c.speedup_at_k], marker="*", ms=11, color=col, mec="black", mew=0.6, ls="none")
                found.append((col, f"{variant(c.fabric).display} ({c.samples:g}): k = {c.k:.3g}"))
            else:
                ax.plot([r.k_values[-1]], [c.paper_speedup], marker="o", ms=7, mfc="none", mec=col, mew=1.2, ls="none",
                        clip_on=False)
                found.append((col, f"{variant(c.fabric).display} ({c.samples:g}): not reached, max "
                                   f"{c.max_speedup:.2f} at k = {c.k_at_max:.3g}" if c.max_speedup else
                              f"{variant(c.fabric).display}: no data"))
        for i, (col, text) in enumerate(found):
            ax.text(0.02, 0.96 - 0.085 * i, text, transform=ax.transAxes, fontsize=7, color=col, va="top",
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.7, pad=0.5))
        ax.axvline(1.0, color="#999999", lw=0.6, ls="--")
        ax.set_xscale("log")
        ax.set_title(w, fontsize=9)
        ax.grid(which="major", lw=0.3, alpha=0.5)
        ax.tick_params(labelsize=7)
        if idx % cols == 0:
            ax.set_ylabel("speedup over the mesh", fontsize=8)
        if idx // cols == rows - 1:
            ax.set_xlabel("k (NPU speed / default NPU)", fontsize=8)
    for idx in range(n, rows * cols):
        axes[idx // cols][idx % cols].axis("off")
    from matplotlib.lines import Line2D     # lazy: matplotlib only when plotting (see _plt)
    from matplotlib.patches import Patch

    handles, labels = axes[0][0].get_legend_handles_labels()
    handles += [Patch(color="#888888", alpha=0.25, label=f"paper value (dotted) +-{PAPER_BAND:.0%}"),
                Line2D([], [], marker="*", ms=9, color="#888888", mec="black", ls="none",
                       label="reproduced: smallest k (samples)"),
                Line2D([], [], marker="o", mfc="none", mec="#888888", ls="none", label="paper value not reached"),
                Line2D([], [], color="#999999", ls="--", lw=0.6, label="k = 1: default NPU")]
    fig.legend(handles=handles, loc="upper center", ncol=min(5, len(handles)), fontsize=7, frameon=False,
               bbox_to_anchor=(0.5, 0.965))
    fig.suptitle(title, fontsize=10, y=0.995)
    if footnote is None:
        npu = r.npu
        footnote = (f"k x the default NPU ({npu.flops / 1e12:,.0f} TFLOP/s sustained, {npu.hbm_bw / 1e12:g} TB/s HBM at "
                    f"k = 1: {npu.source}); samples per DP replica: {', '.join(f'{s:g}' for s in r.samples)}; "
                    f"switch timing: {r.timing_source}")
    fig.tight_layout(rect=(0, 0.04, 1, 0.93))
    return _save(fig, path, footnote)

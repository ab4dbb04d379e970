"""Plots for the training model (matplotlib, Agg backend): the paper's Fig. 10 and Fig. 11 views."""

from __future__ import annotations

from pathlib import Path

from fred.contract.outputs import atomic_output

#: file types a plot can be written as (matplotlib's Agg canvas, with Pillow for jpg/tif/webp)
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".eps", ".ps", ".jpg", ".jpeg", ".tif", ".tiff",
                 ".webp")

KIND_ORDER = ("compute", "input", "dp", "mp", "pp", "stream", "offload")
KIND_LABEL = {"compute": "compute", "input": "input load", "dp": "exposed DP", "mp": "exposed MP", "pp": "exposed PP",
              "stream": "exposed weight streaming", "offload": "exposed activation offload"}
KIND_COLOR = {"compute": "#4c72b0", "input": "#8c8c8c", "dp": "#dd8452", "mp": "#55a868", "pp": "#c44e52",
              "stream": "#8172b3", "offload": "#937860"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path):
    """Write ``fig`` to ``path`` atomically, in the format its suffix names (png without one)."""
    fmt = Path(path).suffix[1:].lower() or "png"
    with atomic_output(path) as tmp:
        fig.savefig(tmp, dpi=110, format=fmt)


def _parts(e):
    return {"compute": e.compute_time, **{k: e.exposed.get(k, 0.0) for k in KIND_ORDER[1:]}}


def plot_breakdown(rows, path, title=None):
    """Stacked bars per workload x fabric, each normalised to that workload's mesh time."""
    from .params import variant

    plt = _plt()
    workloads = []
    for e in rows:
        if e.workload not in workloads:
            workloads.append(e.workload)
    fig, ax = plt.subplots(figsize=(min(12.0, 2.5 + 0.42 * len(rows)), 4.4))
    x = 0.0
    ticks, labels, centers = [], [], []
    seen = set()
    for wn in workloads:
        cells = [e for e in rows if e.workload == wn]
        base = cells[0].iteration_time / (cells[0].speedup or 1.0)
        xs = []
        for e in cells:
            bottom = 0.0
            for k in KIND_ORDER:
                v = _parts(e)[k] / base
                if v <= 0:
                    continue
                ax.bar(x, v, bottom=bottom, color=KIND_COLOR[k], width=0.8,
                       label=KIND_LABEL[k] if k not in seen else None)
                seen.add(k)
                bottom += v
            if e.speedup:
                ax.text(x, bottom + 0.01, f"{e.speedup:.2f}x", ha="center", va="bottom", fontsize=7)
            ticks.append(x)
            labels.append(variant(e.fabric).display)
            xs.append(x)
            x += 1
        centers.append((sum(xs) / len(xs), wn))
        x += 0.8
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, rotation=45, fontsize=7)
    for cx, wn in centers:
        ax.text(cx, -0.2, wn, ha="center", va="top", transform=ax.get_xaxis_transform(), fontsize=8)
    ax.set_ylabel("time / mesh iteration time")
    ax.set_ylim(0, 1.22)
    if title:
        ax.set_title(title.replace("; ", "\n"), fontsize=8)
    ax.legend(fontsize=7, loc="upper center", ncol=6, frameon=False, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout()
    try:
        _save(fig, path)
    finally:
        plt.close(fig)
    return path


def plot_sweep(results, path, title=None):
    """Per strategy: stacked compute + exposed communication per sample, one bar per fabric."""
    from .params import variant

    plt = _plt()
    strategies = []
    fabrics = []
    for r in results:
        if r["strategy"] not in strategies:
            strategies.append(r["strategy"])
        if r["fabric"] not in fabrics:
            fabrics.append(r["fabric"])
    ok = [r for r in results if r.get("estimate") is not None]
    norm = max((r["estimate"].iteration_time / r["estimate"].minibatch for r in ok), default=1.0)
    fig, ax = plt.subplots(figsize=(min(12.0, 3.0 + 0.5 * len(strategies) * max(1, len(fabrics)) / 2), 4.6))
    width = 0.8 / max(1, len(fabrics))
    seen = set()
    for i, s in enumerate(strategies):
        for j, f in enumerate(fabrics):
            x = i + (j - (len(fabrics) - 1) / 2) * width
            r = next((r for r in results if r["strategy"] == s and r["fabric"] == f), None)
            if r is None or r.get("estimate") is None:
                ax.text(x, 0.02, "n/f", ha="center", fontsize=6, rotation=90)
                continue
            e = r["estimate"]
            bottom = 0.0
            for k in KIND_ORDER:
                v = _parts(e)[k] / e.minibatch / norm
                if v <= 0:
                    continue
                ax.bar(x, v, bottom=bottom, width=width * 0.95, color=KIND_COLOR[k],
                       alpha=1.0 if j == len(fabrics) - 1 else 0.55, edgecolor="black" if j else "none", linewidth=0.3,
                       label=KIND_LABEL[k] if k not in seen else None)
                seen.add(k)
                bottom += v
    ax.set_xticks(range(len(strategies)))
    ax.set_xticklabels([s.replace("-", "\n") for s in strategies], fontsize=6)
    ax.set_ylabel("time per sample (normalised)")
    fab = " | ".join(f"{variant(f).display}{' (dark)' if j == len(fabrics) - 1 else ' (light)'}" for j, f in enumerate(fabrics))
    ax.set_title((title.replace("; ", "\n") + "\n" if title else "") + fab, fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)   # outside: never over a bar
    fig.tight_layout()
    try:
        _save(fig, path)
    finally:
        plt.close(fig)
    return path

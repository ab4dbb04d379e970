"""``fred infer --plot``: per workload, time to first token and time per output token of each
fabric, stacked as compute and exposed communication per kind (matplotlib, Agg backend; written
atomically, in the format its suffix names)."""

from __future__ import annotations

from pathlib import Path

from fred.contract.outputs import atomic_output

from fred.model.system import variant

PARTS = (("compute", "compute", "#4c72b0"), ("mp", "exposed MP All-Reduce", "#55a868"),
         ("pp", "exposed PP send", "#c44e52"), ("ep", "exposed EP all-to-all", "#8172b2"))


def _values(r, phase):
    if phase == "ttft":
        return {"compute": r.prefill_compute, **r.prefill_exposed}
    return {"compute": r.decode_compute, **r.decode_exposed}


def plot_inference(rows, path, footnote=None) -> str:
    """Write the plot of ``rows`` (:class:`~fred.model.inference.serve.Inference`) to ``path``."""
    # lazy: matplotlib takes ~0.5 s to import and only a run with --plot needs it
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r.workload for r in rows))
    fig, axes = plt.subplots(len(names), 2, figsize=(9, 2.8 * len(names) + 0.6), squeeze=False)
    for i, wn in enumerate(names):
        mine = [r for r in rows if r.workload == wn]
        labels = [variant(r.fabric).display for r in mine]
        for j, (phase, title, scale, unit) in enumerate((("ttft", "time to first token", 1e3, "ms"),
                                                          ("tpot", "time per output token", 1e3, "ms"))):
            ax = axes[i][j]
            bottom = [0.0] * len(mine)
            for key, label, color in PARTS:
                v = [_values(r, phase).get(key, 0.0) * scale for r in mine]
                ax.bar(labels, v, bottom=bottom, color=color, label=label if i == 0 and j == 0 else None)
                bottom = [b + x for b, x in zip(bottom, v)]
            ax.set_title(f"{wn} {mine[0].strategy}, batch {mine[0].batch}: {title}", fontsize=8.5)
            ax.set_ylabel(unit)
    fig.legend(loc="upper center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    if footnote:
        fig.text(0.005, 0.005, footnote, fontsize=6.5, color="#444444", ha="left", va="bottom", wrap=True)
    fmt = Path(path).suffix[1:].lower() or "png"
    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, dpi=110, format=fmt)
    finally:
        plt.close(fig)
    return str(path)

"""The analysis's figures as PNG files (matplotlib; arviz for trace and rank plots)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.design import conditions
from harness.stats.summary.verdict import key

# each effect's colour and dose-plot marker, in conditions.EFFECTS's and conditions.shown()'s order
COLORS = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown", "tab:pink")
MARKERS = "osD^v<>"
BIAS_SHOWN = 0.03  # eq. 12 plot: the tasks whose observed mean bias reaches +3 points in some cell


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


SUMMARY_PLOTS = ("eq11_average_difference.png", "eq12_tasks.png")  # `analyze --plots`' two of every fit
MARK = "tapt-bench"  # each PNG's Software field: a plot of ours, which a later one may replace


def plot_problem(path: str | Path) -> str | None:
    """Why a plot cannot be written at `path` (None where it can): results.file_problem's reasons, or a
    file there that is not a plot tapt-bench made (a user's picture, notes)."""
    from harness.results import file_problem

    path = Path(path)
    problem = file_problem(path, "plot.png")
    if problem is None and path.is_file() and MARK.encode() not in path.read_bytes()[:4096]:
        problem = f"{path} exists and is not a plot tapt-bench made: name another file, or remove it"
    return problem


def save(fig, path: Path) -> Path:
    """The figure as a PNG at `path`, written whole or not at all (results.atomic_write), never over a
    file that is not one of our plots."""
    import io

    from harness.core.plumbing.errors import UserError
    from harness.results import atomic_write

    problem = plot_problem(path)
    if problem:
        pyplot().close(fig)
        raise UserError(problem)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": MARK})
    pyplot().close(fig)
    atomic_write(Path(path), buffer.getvalue())
    return path


def average_differences(fits: list[dict], title: str, path: Path) -> Path:
    """Eq. 11 (the study's Figure 3): per (m, n) cell, the posterior predictive distribution of the
    average accuracy difference, boost and bias overlaid."""
    plt = pyplot()
    ms = sorted({f["record"]["m"] for f in fits})
    ns = sorted({f["record"]["n"] for f in fits})
    fig, axes = plt.subplots(
        len(ms),
        len(ns),
        figsize=(max(6.4, 3.2 * len(ns)), 2.4 * len(ms) + 0.6),
        squeeze=False,
        sharex=True,
        layout="constrained",
    )
    colors = dict(zip(conditions.EFFECTS, COLORS))
    for f in fits:
        r = f["record"]
        ax = axes[ms.index(r["m"])][ns.index(r["n"])]
        ax.hist(
            100 * f["differences"]["all"],
            bins=50,
            density=True,
            alpha=0.6,
            color=colors[r["effect"]],
            label=r["effect"],
        )
        ax.set_title(f"m={r['m']} n={r['n']}", fontsize=9)
    for ax in axes.ravel():
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks([])
        ax.set_visible(bool(ax.patches))  # a cell the results do not have
    for ax in axes[-1]:
        ax.set_xlabel("accuracy difference (points)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{title}: posterior predictive average difference (eq. 11)")
    return save(fig, path)


def task_differences(fits: list[dict], title: str, path: Path) -> Path | None:
    """Eq. 12 (the study's Figure 4): per-task bias with its HDI in every cell, for the tasks whose
    observed mean bias reaches BIAS_SHOWN in at least one cell. None when no task does."""
    plt = pyplot()
    bias = [f["record"] for f in fits if f["record"]["effect"] == conditions.PRIMARY]
    tasks = sorted({t["task"] for r in bias for t in r["per_task"] if t["observed"] >= BIAS_SHOWN})
    if not tasks:
        return None
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.25 * len(tasks) * max(1, len(bias))), layout="constrained")
    offsets = np.linspace(-0.35, 0.35, len(bias)) if len(bias) > 1 else [0.0]
    for off, r in zip(offsets, bias):
        per = {t["task"]: t for t in r["per_task"]}
        ys = [tasks.index(t) + off for t in tasks if t in per]
        rows = [per[t] for t in tasks if t in per]
        ax.errorbar(
            [100 * t["mean"] for t in rows],
            ys,
            xerr=[
                [100 * (t["mean"] - t["hdi"][0]) for t in rows],
                [100 * (t["hdi"][1] - t["mean"]) for t in rows],
            ],
            fmt="o",
            ms=3,
            lw=1,
            label=f"m={r['m']} n={r['n']}",
        )
    ax.set_yticks(range(len(tasks)), tasks)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("bias, test - extra (points): posterior predictive mean and HDI (eq. 12)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(f"{title}: tasks with an observed mean bias of +{100 * BIAS_SHOWN:.0f} points or more")
    return save(fig, path)


def diagnostics(idata, label: str, folder: Path) -> list[Path]:
    """Trace and rank plots of beta and the scales of one fit."""
    import arviz as az

    plt = pyplot()
    names = [v for v in ("beta", "sigma_U", "sigma_V", "sigma_W") if v in idata.posterior]
    out = []
    for kind, draw in (("trace", az.plot_trace), ("rank", az.plot_rank)):
        axes = draw(idata, var_names=names)
        fig = np.asarray(axes).ravel()[0].figure
        fig.suptitle(f"{label}: {kind} plot")
        out.append(save(fig, folder / f"{kind}_{label}.png"))
    plt.close("all")
    return out


def meta_cdf(result: dict, title: str, path: Path) -> Path:
    """The study's Figure 7: the empirical CDF of the slices' posterior means of beta, with (-rope, rope)."""
    plt = pyplot()
    means = np.sort(result["posterior_means"])
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.step(means, np.arange(1, len(means) + 1) / len(means), where="post")
    for x in (-result["rope"], result["rope"]):
        ax.axvline(x, color="grey", ls="--", lw=0.8)
    ax.set_xlabel(f"posterior mean of beta in one slice ({result['slices']} slices)")
    ax.set_ylabel("share of slices")
    ax.set_title(
        f"{title}: {100 * result['share_outside']:.0f}% outside (-{result['rope']}, {result['rope']})"
    )
    return save(fig, path)


def calibration(table: pd.DataFrame, label: str, path: Path) -> Path:
    """Observed against posterior predictive mean accuracy per (task, condition), with HDIs."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.errorbar(
        table["observed"],
        table["predicted"],
        yerr=[table["predicted"] - table["hdi_low"], table["hdi_high"] - table["predicted"]],
        fmt="o",
        ms=3,
    )
    lo, hi = table[["observed", "hdi_low"]].min().min(), table[["observed", "hdi_high"]].max().max()
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
    ax.set_xlabel("observed mean accuracy")
    ax.set_ylabel("posterior predictive mean accuracy")
    ax.set_title(f"{label}: calibration")
    return save(fig, path)


def prior_predictive(accuracies: np.ndarray, label: str, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.hist(accuracies, bins=50, density=True)
    ax.set_xlabel("accuracy under the priors")
    ax.set_title(f"{label}: prior predictive")
    return save(fig, path)


def png(fig) -> bytes:
    """A figure as PNG bytes (for a self-contained report), closed after."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    pyplot().close(fig)
    return buffer.getvalue()


def task_effects(tasks: list[dict]):
    """Per task of one cell and model: the observed mean boost, bias and (where run) leak, in points."""
    plt = pyplot()
    names = [t["task"] for t in tasks]
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(names) + 1.2))
    y = np.arange(len(names))
    for effect, marker in zip(conditions.EFFECTS, "os^Dv"):
        if all(key(effect, "mean") in t for t in tasks):
            label = conditions.label(effect, " - ")
            ax.scatter([100 * t[key(effect, "mean")] for t in tasks], y, marker=marker, label=label)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlabel("mean accuracy difference over subsamples (points)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def record_intervals(records: list[dict], per_task: bool):
    """From analysis records: the posterior predictive difference with its HDI per (m, n, effect)
    (eq. 11), or per task within each (eq. 12), with the observed difference."""
    plt = pyplot()
    rows = []
    for r in records:
        items = r["per_task"] if per_task else [{**r["average_difference"], "task": "all tasks"}]
        rows += [(f"m{r['m']} n{r['n']} {r['effect']}: {t['task']}", t) for t in items]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(rows) + 1.2))
    y = np.arange(len(rows))
    means = np.array([100 * t["mean"] for _, t in rows])
    low = means - np.array([100 * t["hdi"][0] for _, t in rows])
    high = np.array([100 * t["hdi"][1] for _, t in rows]) - means
    ax.errorbar(means, y, xerr=[low, high], fmt="o", ms=4, label="posterior predictive mean and HDI")
    ax.scatter([100 * t["observed"] for _, t in rows], y, marker="x", color="black", label="observed")
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(y, [name for name, _ in rows], fontsize=7)
    ax.set_xlabel("accuracy difference, treatment - control (points)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def dose_of(model: str) -> tuple[str, str, float] | None:
    """(the model without its dose, the setting, its value) of a model folder named <model>@<setting>=<value>
    (a config's `doses`); None for a model run at one strength."""
    name, _, dose = model.partition("@")
    setting, _, value = dose.partition("=")
    try:
        return (name, setting, float(value)) if dose else None
    except ValueError:
        return None


def dose_response(configs: list[dict]):
    """Per dosed model: the pooled bias and leak (and the boost) against the dose, with their two-sided
    95% intervals; an unbounded end (too few units) is drawn to the panel's edge, dashed, with an arrow
    there; one panel a model."""
    plt = pyplot()
    groups: dict[tuple, list] = {}
    for c in configs:
        found = dose_of(c["model"])
        if found:
            groups.setdefault((found[0], found[1], c["m"], c["n"]), []).append((found[2], c))
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 3.6), squeeze=False)
    for ax, ((model, setting, m, n), points) in zip(axes[0], sorted(groups.items())):
        points.sort(key=lambda p: p[0])
        x = np.array([p[0] for p in points])
        drawn = [e for e in conditions.shown() if all(key(e, "mean") in c for _, c in points)]
        values = [100 * c[key(e, s)] for e in drawn for _, c in points for s in ("mean", "low", "high")]
        finite = [v for v in values if np.isfinite(v)] or [0.0]
        pad = max(1.0, 0.15 * (max(finite) - min(finite)))
        bottom, top = min(finite) - pad, max(finite) + pad
        for i, (effect, marker) in enumerate(zip(conditions.shown(), MARKERS)):
            if effect not in drawn:
                continue
            rows = [c for _, c in points]
            mean = np.array([100 * c[key(effect, "mean")] for c in rows])
            low = np.array([100 * c[key(effect, "low")] for c in rows])
            high = np.array([100 * c[key(effect, "high")] for c in rows])
            shift = x * (1 + 0.06 * (i - 1))  # side by side at each dose, on the log axis
            label = conditions.label(effect, " - ")
            shown_low, shown_high = (
                np.where(np.isfinite(low), low, bottom),
                np.where(np.isfinite(high), high, top),
            )
            bars = ax.errorbar(
                shift,
                mean,
                yerr=[mean - shown_low, shown_high - mean],
                fmt=marker + "-",
                ms=5,
                capsize=3,
                label=label,
            )
            for end, edge, arrow in ((low, bottom, "v"), (high, top, "^")):
                out = ~np.isfinite(end)
                if out.any():  # unbounded: dashed to the edge, an arrow at it
                    color = bars[0].get_color()
                    ax.vlines(shift[out], mean[out], edge, colors=color, linestyles="dashed", lw=1)
                    ax.plot(shift[out], np.full(out.sum(), edge), arrow, color=color, ms=7, clip_on=False)
        ax.set_ylim(bottom, top)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.minorticks_off()
        ax.set_xlabel(f"{setting} (dose)")
        ax.set_ylabel("accuracy difference (points)")
        ax.set_title(f"{model}, m {m}, n {n}", fontsize=9)
        ax.legend(fontsize=8)
    return fig

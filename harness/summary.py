"""Table-1 summary of accuracies.csv files: boost (extra - base), bias (test - extra), per-task tests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from harness.results import COLUMNS, OPTIONAL
from harness.errors import UserError

LAYOUT = re.compile(r"m(\d+)/n(\d+)/([^/]+)/([^/]+)/accuracies\.csv$")
RESAMPLES = 10_000
ALPHA, POWER = 0.05, 0.80
DETECTABLE_METHOD = ("detectable bias (MDE): the smallest mean bias the one-sided paired test (alpha 0.05) finds "
                     "with 80% power, (t_0.95,K-1 + t_0.80,K-1) * sd(test - extra) / sqrt(K), K subsamples "
                     "(normal approximation with t quantiles); inf below K = 5, where the sign-flip test's "
                     "smallest p-value, 2^-K, is above 0.05")


def read_accuracies(path: Path, n: int) -> pd.DataFrame:
    """One accuracies.csv, checked: readable, all columns, accuracies multiples of 1/n."""
    try:
        df = pd.read_csv(path)
    except Exception as err:  # any parser failure means an unusable file
        raise UserError(f"{path}: unreadable accuracies.csv ({type(err).__name__}: {err})") from err
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise UserError(f"{path}: missing column(s) {missing}; expected {COLUMNS}")
    for col in COLUMNS + [c for c in OPTIONAL if c in df.columns]:
        numbers = pd.to_numeric(df[col], errors="coerce")
        bad = numbers.isna()
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise UserError(f"{path}: row {row} (line {row + 2}), column {col!r}: {df[col].iloc[row]!r} is not a "
                            "number; fix or delete that row")
        df[col] = numbers
    counts = df[["base", "extra", "test", *[c for c in OPTIONAL if c in df.columns]]].to_numpy(dtype=float) * n
    off = np.abs(counts - np.round(counts)) > 1e-6
    if off.any():
        row = int(np.argwhere(off)[0][0])
        raise UserError(
            f"{path}: row {row} is not a multiple of 1/{n} although the folder says n={n}: "
            "rows of another n are mixed into this folder; keep one n per n<n> folder"
        )
    return df


def collect(root: str | Path) -> pd.DataFrame:
    """Every accuracies.csv under root (the study's layout), one row per subsample."""
    root = Path(root)
    frames = []
    for path in sorted(root.rglob("accuracies.csv")):
        match = LAYOUT.search(path.as_posix())
        if not match:
            raise UserError(f"{path}: not in the layout m<m>/n<n>/<model>/<task>/accuracies.csv")
        m, n, model, task = match.groups()
        df = read_accuracies(path, int(n))
        frames.append(df.assign(m=int(m), n=int(n), model=model, task=task, subsample=range(len(df))))
    if not frames:
        raise UserError(f"{root}: no accuracies.csv found (expected m<m>/n<n>/<model>/<task>/accuracies.csv)")
    return pd.concat(frames, ignore_index=True)


def bias_pvalue(test: np.ndarray, extra: np.ndarray, seed: int = 0) -> float:
    """Paired permutation test of H1: E[test - extra] > 0 (signs of the differences are permuted)."""
    if len(test) < 2 or np.all(test == extra):
        return 1.0
    res = stats.permutation_test(
        (test, extra), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
        alternative="greater", n_resamples=RESAMPLES, vectorized=True, random_state=seed,
    )
    return float(res.pvalue)


def detectable_effect(differences: np.ndarray, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean shift of these paired differences that a one-sided test at `alpha` detects
    with probability `power`, from their spread and count (see DETECTABLE_METHOD)."""
    k = len(differences)
    if k < 2 or 0.5**k > alpha:  # the sign-flip test's smallest p-value is 2^-K: it can never reject
        return float("inf")
    return float((stats.t.ppf(1 - alpha, k - 1) + stats.t.ppf(power, k - 1)) * np.std(differences, ddof=1) / np.sqrt(k))


def summarize(df: pd.DataFrame, seed: int = 0) -> dict[str, Any]:
    """The JSON summary: per (m, n, model) and per task means, p-values and BH-adjusted p-values;
    with a leak column, the same for leak - extra (the planted labeled contamination)."""
    df = df.assign(boost=df["extra"] - df["base"], bias=df["test"] - df["extra"])
    has_leak = "leak" in df.columns and df["leak"].notna().all()
    if has_leak:
        df = df.assign(leak_effect=df["leak"] - df["extra"])
    configs, tasks = [], []
    for (m, n, model), group in df.groupby(["m", "n", "model"], sort=True):
        per_task = []
        for task, t in group.groupby("task", sort=True):
            row = {"m": int(m), "n": int(n), "model": model, "task": task,
                   "boost_mean": float(t["boost"].mean()), "bias_mean": float(t["bias"].mean()),
                   "p_value": bias_pvalue(t["test"].to_numpy(), t["extra"].to_numpy(), seed),
                   "detectable_bias": detectable_effect(t["bias"].to_numpy())}
            if has_leak:
                row |= {"leak_mean": float(t["leak_effect"].mean()),
                        "leak_p_value": bias_pvalue(t["leak"].to_numpy(), t["extra"].to_numpy(), seed)}
            per_task.append(row)
        for key in ("p_value", "leak_p_value") if has_leak else ("p_value",):
            adjusted = stats.false_discovery_control([t[key] for t in per_task], method="bh")
            for t, p in zip(per_task, adjusted):
                t[key.replace("value", "adjusted")] = float(p)
        tasks += per_task
        config = {"m": int(m), "n": int(n), "model": model,
                  "boost_mean": float(group["boost"].mean()), "bias_mean": float(group["bias"].mean()),
                  "tasks": len(per_task), "rows": len(group),
                  "tasks_positive_bias": sum(t["bias_mean"] > 0 for t in per_task),
                  "tasks_negative_bias": sum(t["bias_mean"] < 0 for t in per_task),
                  "detectable_bias_median": float(np.median([t["detectable_bias"] for t in per_task]))}
        if has_leak:
            config["leak_mean"] = float(group["leak_effect"].mean())
        configs.append(config)
    return {"configs": configs, "tasks": tasks}


def format_tables(summary: dict[str, Any]) -> str:
    """Human-readable tables: one line per (m, n, model), then its tasks (points, MDE included)."""
    lines = [DETECTABLE_METHOD, ""]
    for c in summary["configs"]:
        leak = "leak_mean" in c
        lines.append(f"m={c['m']} n={c['n']} model={c['model']}: {c['tasks']} tasks, {c['rows']} rows; "
                     f"boost (extra-base) {100 * c['boost_mean']:+.2f} pts, bias (test-extra) "
                     f"{100 * c['bias_mean']:+.2f} pts" + (f", leak (leak-extra) {100 * c['leak_mean']:+.2f} pts"
                                                           if leak else "") +
                     f"; tasks with bias >0: {c['tasks_positive_bias']}, <0: {c['tasks_negative_bias']}")
        lines.append(f"  {'task':34} {'boost':>7} {'bias':>7} {'p':>7} {'p_BH':>7} {'MDE':>6}"
                     + (f" {'leak':>7} {'p':>7} {'p_BH':>7}" if leak else ""))
        for t in summary["tasks"]:
            if (t["m"], t["n"], t["model"]) == (c["m"], c["n"], c["model"]):
                lines.append(f"  {t['task']:34} {100 * t['boost_mean']:+7.2f} {100 * t['bias_mean']:+7.2f} "
                             f"{t['p_value']:7.4f} {t['p_adjusted']:7.4f} {100 * t['detectable_bias']:6.2f}"
                             + (f" {100 * t['leak_mean']:+7.2f} {t['leak_p_value']:7.4f} {t['leak_p_adjusted']:7.4f}"
                                if leak else ""))
        if np.isfinite(c["detectable_bias_median"]):
            lines.append(f"  any task bias above its MDE would have been seen with 80% power; median MDE "
                         f"{100 * c['detectable_bias_median']:.2f} pts")
        else:
            lines.append(f"  with under 5 subsamples per task no permutation p-value can fall below {ALPHA}: "
                         "these rows show effects, not evidence; run more subsamples to test them")
        lines.append("")
    return "\n".join(lines)


def prediction_changes(root: str | Path) -> pd.DataFrame:
    """Per task, the share of test documents whose predicted class differs between two conditions:
    each TAPT condition against base, and test (and leak) against extra. A condition that never
    changes a prediction cannot change an accuracy either."""
    rows = []
    for path in sorted(Path(root).rglob("probabilities.parquet")):
        probs = pd.read_parquet(path)
        predicted = probs.assign(pred=probs["probs"].map(np.argmax)).pivot_table(
            index=["subsample", "row"], columns="condition", values="pred")
        pairs = [(c, "base") for c in ("extra", "test", "leak") if c in predicted]
        pairs += [(c, "extra") for c in ("test", "leak") if c in predicted]
        rows.append({"task": path.parent.name, "docs": len(predicted),
                     **{f"{a}/{b}": float((predicted[a] != predicted[b]).mean()) for a, b in pairs}})
    return pd.DataFrame(rows)


def format_changes(changes: pd.DataFrame) -> str:
    pairs = [c for c in changes.columns if "/" in c]
    lines = ["share of test predictions that differ between conditions:",
             f"  {'task':34} {'docs':>5} " + " ".join(f"{p:>10}" for p in pairs)]
    for r in changes.to_dict("records"):
        lines.append(f"  {r['task']:34} {r['docs']:5d} " + " ".join(f"{r[p]:10.1%}" for p in pairs))
    return "\n".join(lines)

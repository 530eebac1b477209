"""Table 1 beside the study: a classifier-flow results folder (ours) against the study's released BERT
accuracies of the same cell, per task and pooled, each effect with its 95% interval (the summary's:
the sign-flip test inverted), the units whose base beats its test subsample's majority share (the
study's `majority`), and one sentence per cell and effect read from the intervals.

The sentence compares the two pooled means by Welch's interval of their difference (ours - the
study's, scipy): "differ" where it excludes 0; "agree within B points" where it lies inside +-B;
else "cannot tell". The study is read twice: on the tasks both have, and on all of its 25. Where the
replication planted a leak, its bias is read only where that leak is seen (its pooled interval above
0): else the bias's sentence is "cannot tell", whatever the two means, since a design that misses the
planted effect cannot vouch for the absence of one. Where it planted none, the bias's sentence says so.

    python benchmarks/table1_compare.py --results results/table1_minilm --model minilm \
        [--reference ../shared/reference] [--bound 3]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import results  # noqa: E402
from harness.core.plumbing.settings import Settings, option, parse_script  # noqa: E402
from harness.stats.summary.statistics import flip_interval  # noqa: E402

# the release's folder names that differ from the task slugs (../shared/reference/README.md)
RELEASED_AS = {"FRENK-hate-en": "frenk_hate_en", "patent-classification": "patent_classification"}
RELEASED_AS["silicone"] = "silicone_dyda_da"
EFFECTS = {"boost": ("extra", "base"), "bias": ("test", "extra"), "leak": ("leak", "extra")}


def effect(rows: pd.DataFrame, name: str) -> np.ndarray:
    treated, control = EFFECTS[name]
    return (rows[treated] - rows[control]).to_numpy(float)


def shown(d: np.ndarray) -> str:
    """A mean in points with its 95% interval."""
    if len(d) == 0:
        return "-"
    low, high = flip_interval(d)
    ends = f"[{100 * low:+.2f}, {100 * high:+.2f}]" if np.isfinite(low) and np.isfinite(high) else "[n/a]"
    return f"{100 * d.mean():+.2f} {ends}"


def above_majority(rows: pd.DataFrame | None) -> str:
    """Units whose base beats its test subsample's majority share (the study's `majority`; ours read from
    the test documents, whatever the table's column meant when written): 'k/K'."""
    if rows is None or rows.empty:
        return "-"
    share = rows[results.TEST_MAJORITY] if results.TEST_MAJORITY in rows else rows["majority"]
    return f"{int((rows['base'] > share + 1e-9).sum())}/{len(rows)}"


def sentence(ours: np.ndarray, theirs: np.ndarray, bound: float, leak: np.ndarray | None = None) -> str:
    """Ours against the study's pooled mean: differ, agree within the bound, or cannot tell; `leak`, our
    planted leak's per-unit effects, where it is read first."""
    ci = stats.ttest_ind(ours, theirs, equal_var=False).confidence_interval(0.95)
    low, high = 100 * ci.low, 100 * ci.high
    gap = f"ours - study {100 * (ours.mean() - theirs.mean()):+.2f} [{low:+.2f}, {high:+.2f}] (Welch)"
    if leak is not None and not flip_interval(leak)[0] > 0:
        return f"cannot tell: the replication's planted leak is not seen, {shown(leak)}; {gap}"
    if low > 0 or high < 0:
        return f"differ: {gap}"
    if -bound < low and high < bound:
        return f"agree within {bound:g} points: {gap}"
    return f"cannot tell: {gap}, wider than +-{bound:g} points"


def released(reference: Path, m: int, n: int) -> pd.DataFrame:
    df = results.collect(reference / "accuracies" / "bert_gpt2")
    df = df[(df["m"] == m) & (df["n"] == n) & (df["model"] == "bert")]
    return df.assign(task=df["task"].replace(RELEASED_AS))


def released_cells(reference: Path) -> tuple[list, list]:
    df = results.collect(reference / "accuracies" / "bert_gpt2")
    df = df[df["model"] == "bert"]
    return list(df["m"]), list(df["n"])


def cell_table(ours: pd.DataFrame, study: pd.DataFrame, bound: float) -> list[str]:
    """The per-task and pooled table of one cell (boost and bias, ours beside the study's; our leak),
    then the sentences."""
    common = sorted(set(ours["task"]) & set(study["task"]))
    study_common = study[study["task"].isin(common)]
    has_leak = "leak" in ours and bool(ours["leak"].notna().all())
    head = "| task | units (ours, study) | base > majority (ours, study) | boost ours | boost study |"
    head += " bias ours | bias study |" + (" leak ours |" if has_leak else "")
    lines = [head, "|---" * (7 + has_leak) + "|"]

    def row(label: str, o: pd.DataFrame | None, s: pd.DataFrame) -> str:
        cells = [
            label,
            f"{len(o) if o is not None else '-'}, {len(s)}",
            f"{above_majority(o)}, {above_majority(s)}",
        ]
        for e in ("boost", "bias"):
            cells += [shown(effect(o, e)) if o is not None else "-", shown(effect(s, e))]
        if has_leak:
            cells.append(shown(effect(o, "leak")) if o is not None else "-")
        return "| " + " | ".join(cells) + " |"

    lines += [row(t, ours[ours["task"] == t], study_common[study_common["task"] == t]) for t in common]
    lines.append(row(f"**pooled, the {len(common)} tasks in common**", ours, study_common))
    lines.append(row(f"**pooled, the study's {study['task'].nunique()}**", None, study))
    lines.append("")
    for e in ("boost", "bias"):
        for label, s in (("in common", study_common), ("all", study)):
            leak = effect(ours, "leak") if has_leak and e == "bias" else None
            said = sentence(effect(ours, e), effect(s, e), bound, leak)
            if e == "bias" and not has_leak:
                said += "; read without a positive control: the replication planted no leak"
            lines.append(f"- {e}, against the study's tasks {label}: {said}")
    return lines


@dataclass(kw_only=True)
class CompareArgs(Settings):
    ABOVE = {"bound": 0.0}

    results: str = option(help="the replication's results folder")
    model: str = option("minilm", "its model folder's name")
    reference: str = option(str(ROOT.parent / "shared" / "reference"), "the study's release")
    bound: float = option(3.0, "points: within it, two means agree")


def main(argv: list[str] | None = None) -> None:
    args = parse_script(CompareArgs, __doc__, argv)
    reference = Path(args.reference)
    if not (reference / "accuracies" / "bert_gpt2").is_dir():
        sys.exit(f"error: --reference {reference}: no accuracies/bert_gpt2 there; name the study's release")
    ours = results.collect(args.results)
    ours = ours[ours["model"] == args.model]
    if ours.empty:
        sys.exit(f"error: --results {args.results}: no units of model {args.model!r} (name it with --model)")
    for (m, n), cell in ours.groupby(["m", "n"]):
        study = released(reference, int(m), int(n))
        if study.empty:
            cells = sorted({(int(a), int(b)) for a, b in zip(*released_cells(reference))})
            print(f"### m {m} / n {n}: the study released no BERT units of this cell (its cells: {cells})\n")
            continue
        print(
            f"### m {m} / n {n}: ours {len(cell)} units over {cell['task'].nunique()} tasks; "
            f"the study's BERT {len(study)} over {study['task'].nunique()}\n"
        )
        print("\n".join(cell_table(cell, study, args.bound)) + "\n")


if __name__ == "__main__":
    from harness.core.plumbing.errors import UserError

    try:
        main()
    except UserError as err:  # a folder or file of the user's: one line, as tapt-bench says it
        sys.exit(f"error: {err}")

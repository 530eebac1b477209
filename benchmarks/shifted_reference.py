"""Whole-split exposure verdicts against shifted references: how often does `contamination exposure`
say SEEN for an adapter that never saw the suspect documents, with the verdict before the reference
check (SEEN at p <= alpha, only the base's mean text score as a caveat) and after it (SEEN only where
the check can reach alpha and finds no shift; otherwise INCONCLUSIVE)?

The adapters are those of a `contamination calibrate` grid (kept adapters; missing units are trained
first): its `extra` adapters never saw the suspect documents (the false-positive rows), its `test`
adapters saw their subsample's test documents (the power rows). Per task, two pools of documents no
subsample of the grid drew: the suspect set, and a reference set read four ways: as it is (the same
task's other documents), behind a constant prefix, lowercased without punctuation, and replaced by
another task's texts in this task's prompt. Usage:
    python benchmarks/shifted_reference.py --config label_verdict --out results/label_verdict \\
        --data-dir ../shared/data --json shifted_reference.json
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass

import numpy as np
import pandas as pd

import harness
from contamination import doc_scores
from contamination.exposure import exposure_test, two_sided
from contamination.verdict import flags, inconclusive
from harness import results
from harness.core.design import conditions
from harness.core.design.power import ALPHA, wilson
from harness.core.engine.models import load_scoring_model, resolve
from harness.core.plumbing.settings import Settings, option, parse_script
from harness.grid.configuration import resolve as run_layout
from harness.grid.configuration.config import load_config
from harness.study import calibrate
from harness.tasks import prompts
from harness.tasks.lm_eval_spec import folder_name
from harness.tasks.protocol import find_spec, subsample_docs

SAME = "same task"
UNION = "suspect and same-task pools"  # the unshifted draws: both sets from both pools, split afresh
PREFIX = "<script>x</script> ünïcödé 日本語 🎬 "  # markup, accents, CJK, an emoji: far from plain text
SHIFTS = {
    SAME: lambda t: t,
    "prefix": lambda t: PREFIX + t,
    "lowercased, no punctuation": lambda t: t.lower().translate(str.maketrans("", "", string.punctuation)),
}
OTHER = "another task's texts"


@dataclass(kw_only=True)
class ShiftArgs(Settings):
    """Which grid's adapters, which sizes, how many draws."""

    SMOKE = {"sizes": [4], "draws": 1, "pool": 6}
    MINIMUM = {"draws": 1, "pool": 4}

    config: str = option("label_verdict", "the calibrate grid config (a shipped name or a file)")
    out: str = option("results/label_verdict", "the calibrate run's folder (its padding grid is read)")
    data_dir: str | None = option(None, "offline data folder (default: the hub)")
    subsamples: int | None = option(None, "adapters per task (default: the config's subsamples)")
    sizes: list[int] = option([8, 32, 100], "documents a side")
    draws: int = option(4, "random draws of both sets per adapter at each size below the pool")
    pool: int = option(100, "unseen documents per set, the largest size")
    batch_size: int = option(16, "documents per forward pass")
    json: str | None = option(None, "write every test's verdicts here")


def unseen_pools(spec, cfg, pool: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two disjoint sets of documents that no subsample of the grid drew (text, label, row)."""
    everything = spec.split_docs(spec.split_names()[0], cfg.sample.data_dir)
    drawn = set()
    for k in range(cfg.grid.subsamples):
        drawn |= {int(r) for docs in subsample_docs(spec, cfg.sample, k).values() for r in docs["row"]}
    free = everything[~everything["row"].isin(drawn)]
    picked = free.sample(2 * pool, random_state=seed).reset_index(drop=True)
    return picked.iloc[:pool], picked.iloc[pool:]


def reference_sets(spec, reference: pd.DataFrame, other: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The reference read each way, rendered by the task's prompt."""
    sets = {name: reference.assign(text=reference["text"].map(shift)) for name, shift in SHIFTS.items()}
    labels = np.random.default_rng(0).integers(len(spec.classes), size=len(other))
    sets[OTHER] = other.assign(label=labels, row=reference["row"].to_numpy()[: len(other)])
    return {name: prompts.rendered(spec, df[["text", "label", "row"]]) for name, df in sets.items()}


def scored(model, tokenizer, spec, sets: dict[str, pd.DataFrame], batch_size: int) -> dict[str, pd.DataFrame]:
    return {
        name: doc_scores.prompt_scores(model, tokenizer, spec, df.assign(split="x"), batch_size)
        for name, df in sets.items()
    }


def one_test(model_scores, base_scores, sets, suspect: str, reference: str, rows: tuple) -> dict:
    """The exposure test of a draw: suspect rows of one set against reference rows of another."""
    parts = {"test": (suspect, rows[0]), "extra": (reference, rows[1])}
    frames = {
        who: pd.concat(
            [scores[name].iloc[idx].assign(split=split) for split, (name, idx) in parts.items()],
            ignore_index=True,
        )
        for who, scores in (("model", model_scores), ("base", base_scores))
    }
    texts = [t for split, (name, idx) in parts.items() for t in sets[name]["text"].iloc[idx]]
    result = exposure_test(frames["model"], frames["base"], texts=texts)
    seen_before = bool(flags(result)["text"])
    return {
        "before_seen": seen_before,
        "before_seen_uncaveated": seen_before and two_sided(result["shift"]["text"]) > ALPHA,
        "after_seen": seen_before and not inconclusive(result),
        "after_inconclusive": inconclusive(result) is not None,
        "effect": result["text"]["effect"],
        "check_p": result["reference_check"]["p"],
    }


def fresh_splits(n: int, size: int, count: int, seed: int) -> list[tuple]:
    """Disjoint suspect and reference sets of `size` drawn from one pool of n, `count` times."""
    rng = np.random.default_rng([seed, size])
    return [tuple(np.split(rng.choice(n, 2 * size, replace=False), 2)) for _ in range(count)]


def draws(n_suspect: int, n_reference: int, size: int, count: int, seed: int) -> list[tuple]:
    if size >= n_suspect and size >= n_reference:
        return [(np.arange(n_suspect), np.arange(n_reference))]
    rng = np.random.default_rng(seed)
    return [
        (rng.choice(n_suspect, min(size, n_suspect), False), rng.choice(n_reference, size, False))
        for _ in range(count)
    ]


def main() -> None:
    from peft import PeftModel

    args = parse_script(ShiftArgs, __doc__)
    overrides = {"out": args.out} | ({"data_dir": args.data_dir} if args.data_dir else {})
    cfg = load_config(args.config, overrides)
    if args.subsamples:
        cfg = cfg.replace(subsamples=args.subsamples)
    grid = calibrate.mode_config(cfg, "padding")  # the mode `calibrate --modes padding` trains
    harness.run(grid, keep_adapters=True)  # the calibrate run's units are reused; only missing ones trained
    base, tokenizer = load_scoring_model(resolve(cfg.model.base))
    rows = []
    for t, slug in enumerate(grid.slugs):
        spec = find_spec(slug, grid.sample.include_path)
        suspect, reference = unseen_pools(spec, grid, args.pool, seed=t)
        other_spec = find_spec(grid.slugs[(t + 1) % len(grid.slugs)], grid.sample.include_path)
        _, other = unseen_pools(other_spec, grid, args.pool, seed=t)
        sets = {"suspect": prompts.rendered(spec, suspect[["text", "label", "row"]])}
        sets |= reference_sets(spec, reference, other)
        base_scores = scored(base, tokenizer, spec, sets, args.batch_size)
        tdir = results.task_dir(run_layout.folder(grid), folder_name(slug))
        for k in range(grid.grid.subsamples):
            for cond in (conditions.EXTRA, conditions.TEST):
                mine, mine_base = dict(sets), dict(base_scores)
                if cond == conditions.TEST:  # the documents it saw, as the suspect set; power where unshifted
                    suspect = subsample_docs(spec, grid.sample, k)[conditions.TEST]
                    mine = {"suspect": suspect, SAME: sets[SAME]}
                    mine_base |= scored(base, tokenizer, spec, {"suspect": mine["suspect"]}, args.batch_size)
                model = PeftModel.from_pretrained(base, results.adapter_path(tdir, k, cond)).eval()
                mine_scores = scored(model, tokenizer, spec, mine, args.batch_size)
                base = model.unload()
                n_suspect = len(mine["suspect"])
                if cond == conditions.EXTRA:  # unshifted: both sets drawn afresh from both pools each time
                    for who in (mine, mine_scores, mine_base):
                        who[UNION] = pd.concat([who["suspect"], who[SAME]], ignore_index=True)
                for shift in [s for s in (*SHIFTS, OTHER) if s in mine]:
                    for size in [s for s in args.sizes if s <= n_suspect]:
                        pair = ("suspect", shift)
                        if shift == SAME and UNION in mine:
                            pair, chosen = (UNION, UNION), fresh_splits(len(mine[UNION]), size, args.draws, k)
                        else:
                            chosen = draws(n_suspect, len(sets[shift]), size, args.draws, k)
                        for i, idx in enumerate(chosen):
                            test = one_test(mine_scores, mine_base, mine, *pair, idx)
                            saw = "saw the suspect documents" if cond == conditions.TEST else "never saw them"
                            rows.append({"task": slug, "subsample": k, "adapter": saw, "shift": shift,
                                         "size": int(len(idx[0])), "draw": i, **test})  # fmt: skip
        print(f"{slug}: {sum(r['task'] == slug for r in rows)} tests", flush=True)
        if args.json:  # after every task: a long run that is stopped keeps what it measured
            with open(args.json, "w") as f:
                json.dump({"settings": vars(args), "tests": rows}, f, indent=1)
    print(format_table(pd.DataFrame(rows)))


def rate(column: pd.Series) -> str:
    k, n = int(column.sum()), len(column)
    low, high = wilson(k, n)
    return f"{k:3d}/{n:<3d} {k / n:4.0%} [{low:3.0%}, {high:3.0%}]"


def format_table(table: pd.DataFrame) -> str:
    lines = [
        f"{'adapter':26} {'reference':27} {'n':>4}  {'SEEN before':22} {'SEEN before, no caveat':22} "
        f"{'SEEN after':22} {'INCONCLUSIVE after':22}"
    ]
    for (adapter, shift, size), g in table.groupby(["adapter", "shift", "size"], sort=True):
        lines.append(
            f"{adapter:26} {shift:27} {size:4d}  {rate(g['before_seen']):22} "
            f"{rate(g['before_seen_uncaveated']):22} {rate(g['after_seen']):22} "
            f"{rate(g['after_inconclusive']):22}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""Power of the contamination checks on models whose exposure is known: for each TAPT mode (padding,
packing), a zero-shot grid with the exposure setting and kept adapters trains, per subsample, the
extra, test and leak adapters; then the exchangeability test of Oren et al. runs on every model
(base and the three adapters) in both formats. Printed: per mode and model, the share of subsamples
each check flags at alpha 0.05, and the seconds per model of each check.

Expected: the exposure text statistic flags test and leak, not base (uncalibrated: base against
nothing) or extra; its label statistic flags leak only. Usage (resumable: the grid skips finished
units and the exchangeability p-values are cached in <out>/exchangeability.json):
    python benchmarks/exposure_power.py --data-dir ../shared/data                 # demo scale
    python benchmarks/exposure_power.py --data-dir ../shared/data --n 100 --epochs 1 --lr 2e-4 \
        --batch-size 8 --subsamples 2 --exchangeability false --out runs/power_study   # the study's TAPT
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

from contamination.sharded_test import examples, sharded_test
from harness import results
from harness.core import conditions
from harness.core.models import load_scoring_model, resolve
from harness.core.settings import Settings, option, parse_script
from harness.grid import run as grid_run
from harness.grid.config import GridConfig
from harness.tasks.spec import load_spec
from harness.tasks.splits import subsample_docs

ALPHA = 0.05
FORMATS = ("labeled", "text-only")


@dataclass(kw_only=True)
class PowerArgs(Settings):
    """The grid and the exchangeability test of the benchmark (defaults: demo scale on 2 CPU cores)."""

    task: str = option("rotten_tomatoes", "task")
    base: str = option("SmolLM2-135M-Instruct", "base model")
    data_dir: str | None = option(None, "offline data folder")
    m: int = option(8, "train size (sets which rows are test and extra)")
    n: int = option(8, "test and extra documents")
    subsamples: int = option(10, "subsamples per mode")
    epochs: float = option(2.0, "TAPT epochs")
    lr: float = option(2e-3, "TAPT learning rate")
    batch_size: int = option(4, "TAPT batch size")
    quantize: str = option("none", "none (LoRA) or 4bit (QLoRA)")
    shards: int = option(4, "exchangeability test: shards")
    permutations: int = option(10, "exchangeability test: random orders per shard")
    exchangeability: bool = option(True, "run the exchangeability test (the slow part)")
    out: str = option("runs/power", "output folder (one grid per mode, and the cached p-values)")


def grid(args: PowerArgs, packing: bool) -> GridConfig:
    keys = ("base", "data_dir", "m", "n", "subsamples", "epochs", "lr", "batch_size", "quantize")
    return GridConfig(
        **{k: getattr(args, k) for k in keys},
        tasks=[args.task],
        conditions=list(conditions.ALL),
        exposure=True,
        packing=packing,
        out=str(Path(args.out) / ("packing" if packing else "padding")),
    )


def exchangeability(args: PowerArgs, cfg: GridConfig, cache: dict, cache_path: Path) -> None:
    """p-values of both formats for every unit's four models, cached by (mode, subsample, model)."""
    from peft import PeftModel

    base, tokenizer = load_scoring_model(resolve(args.base))
    spec = load_spec(args.task)
    tdir = grid_run.task_dir(cfg, spec.slug)
    for k in range(cfg.subsamples):
        test_docs = subsample_docs(spec, cfg, k)["test"]
        for cond in conditions.ALL:
            key = f"{Path(cfg.out).name}/{k}/{cond}"
            if key in cache:
                continue
            model = (
                base
                if cond == conditions.BASE
                else PeftModel.from_pretrained(base, tdir / "adapters" / f"{k}_{cond}")
            )
            cache[key] = {}
            for fmt in FORMATS:
                start = time.perf_counter()
                res = sharded_test(
                    model.eval(),
                    tokenizer,
                    examples(spec, test_docs, fmt),
                    args.shards,
                    args.permutations,
                    1024,
                    512,
                    seed=0,
                    batch_size=16,
                )
                cache[key][fmt] = {"pval": res["pval"], "seconds": time.perf_counter() - start}
            if cond != conditions.BASE:
                base = model.unload()
            results.write_json(cache_path, cache)


def main() -> None:
    args = parse_script(PowerArgs, __doc__)
    cache_path = Path(args.out) / "exchangeability.json"
    cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    started = time.perf_counter()
    rows = []
    for packing in (False, True):
        cfg = grid(args, packing)
        grid_run.run(cfg, keep_adapters=True)
        if args.exchangeability:
            exchangeability(args, cfg, cache, cache_path)
        tests = results.exposure_tests(cfg.out)
        units = results.finished(grid_run.task_dir(cfg, args.task))
        for cond in conditions.ALL:
            t = tests[tests["condition"] == cond]
            row = {"mode": "packing" if packing else "padding", "model": cond, "units": len(t)}
            row["exposure text"] = float((t["text_p_test"] <= ALPHA).mean())
            row["exposure label"] = float((t["label_p_test"] <= ALPHA).mean())
            row["exposure s"] = sum(u["seconds"][f"exposure_{cond}"] for u in units.values()) / len(units)
            for fmt in FORMATS if args.exchangeability else ():
                ps = [cache[f"{Path(cfg.out).name}/{k}/{cond}"][fmt] for k in units]
                row[f"exch {fmt}"] = float(sum(p["pval"] <= ALPHA for p in ps) / len(ps))
                row[f"exch {fmt} s"] = float(sum(p["seconds"] for p in ps) / len(ps))
            rows.append(row)
    print_table(args, rows, time.perf_counter() - started)


def print_table(args: PowerArgs, rows: list[dict], seconds: float) -> None:
    settings = {k: v for k, v in dataclasses.asdict(args).items() if k not in ("data_dir", "out")}
    print(f"power at alpha {ALPHA}: {settings}")
    columns = [c for c in rows[0] if c not in ("mode", "model", "units")]
    print(f"  {'mode':8} {'model':6} {'units':>5} " + " ".join(f"{c:>18}" for c in columns))
    for r in rows:
        cells = " ".join(f"{r[c]:18.1f}" if c.endswith(" s") else f"{r[c]:18.0%}" for c in columns)
        print(f"  {r['mode']:8} {r['model']:6} {r['units']:5d} {cells}")
    print(
        "  (shares of subsamples flagged; '... s': seconds per model: exposure = one pass over the test and "
        "extra documents; base's exposure is uncalibrated)"
    )
    print(f"wall time {seconds:.0f} s")


if __name__ == "__main__":
    main()

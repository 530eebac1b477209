"""CoDeC with a context drawn per document against one drawn per block of documents (read once from its
cache), on the adapters a grid kept, side by side: the exposure pass's seconds without CoDeC, with
per-document contexts and with blocks, and each variant's test-against-extra p-value on every model.

Reads a results folder written with `--keep-adapters` (the base, the tasks and the subsamples from its
units). For each kept adapter, the base with that adapter scores the unit's test and extra documents
three times: the exposure test alone, then CoDeC with a block of 1 (a context per document, as the
authors draw it) and with the shipped block. Prints the seconds and their ratios, then per method and
variant the share of models flagged at `--alpha`: test models (which read the test documents) are
CoDeC's power, extra and base models its false positives. Usage:
    python benchmarks/codec_blocks.py --results results/methods_study --data-dir ../shared/data
        [--limit 3] [--conditions extra test] [--timing false]
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from contamination import doc_scores
from contamination.exposure import codec_test
from harness import results
from harness.core.design.power import wilson
from harness.core.engine import models
from harness.core.plumbing.settings import option, parse_script
from harness.grid.unit.unit_record import exposure_docs
from harness.tasks.protocol import find_spec, subsample_docs
from harness.tasks.subsample import DataSettings, SampleSettings


@dataclass(kw_only=True)
class CodecBenchArgs(DataSettings):
    """Which kept adapters are read."""

    MINIMUM = {"k": 1, "limit": 0, "block": 2}

    results: str = option("results/methods_study", "results folder whose grid kept its adapters")
    k: int = option(1, "context documents (the grid's codec_context)")
    block: int = option(8, "documents a block shares one context among (the grid's codec_block)")
    alpha: float = option(0.05, "level a model is flagged at")
    limit: int = option(0, "adapters read at most (0: all)")
    methods: list[str] = option(["prompt-tapt", "self-training"], "methods whose adapters are read")
    conditions: list[str] = option(["extra", "test", "leak"], "conditions whose adapters are read")
    subsamples: list[int] = option([], "subsamples whose adapters are read (empty: all)")
    timing: bool = option(True, "also time the pass without CoDeC (the cost ratios)")
    rescore_blocks: bool = option(
        True,
        "score the blocks again; false: read their p-values from the units, which the grid ran with blocks",
    )
    batch_size: int = option(16, "documents a forward pass")


def scores(model, tokenizer, spec, docs, k: int, block: int | None, batch: int) -> tuple[float, object]:
    start = time.perf_counter()
    out = doc_scores.prompt_scores(
        model, tokenizer, spec, docs, batch, codec_context=k if block else 0, codec_block=block or 1
    )
    return time.perf_counter() - start, out


def main() -> None:
    from peft import PeftModel

    a = parse_script(CodecBenchArgs, __doc__)
    adapters = sorted(Path(a.results).glob("**/adapters/*_*"))
    adapters = [p for p in adapters if p.name.split("_", 1)[1] in a.conditions]
    adapters = [p for p in adapters if not a.subsamples or int(p.name.split("_")[0]) in a.subsamples]
    adapters = adapters[: a.limit or None]  # in path order: the limit takes whole methods first
    seconds, flags, cache = defaultdict(float), defaultdict(list), {}
    print(f"{len(adapters)} adapters under {a.results}, k {a.k}, block {a.block}")
    for path in adapters:
        subsample, cond = path.name.split("_", 1)
        task = path.parent.parent.name
        unit = json.loads(results.unit_paths(path.parent.parent, int(subsample))[0].read_text())
        cell = unit["settings"]
        method = cell.get("method", "prompt-tapt")
        if method not in a.methods:
            continue
        base = models.resolve(cell["base"])
        if base not in cache:
            cache[base] = (models.load_causal_lm(base).eval(), models.tokenizer(base))
        model, tokenizer = cache[base]
        spec = find_spec(task)
        sample = SampleSettings(m=cell["m"], n=cell["n"], seed=cell["seed"], data_dir=a.data_dir)
        docs = exposure_docs(subsample_docs(spec, sample, unit["subsample"]))
        adapted = PeftModel.from_pretrained(model, path).eval()
        timed = {}
        variants = (("without", None),) if a.timing else ()
        blocks = (("blocks", a.block),) if a.rescore_blocks else ()
        if not a.rescore_blocks:  # the unit's own CoDeC test, run by the grid with blocks
            recorded = unit["exposure"]["tests"][cond]["codec"]["p_test"]
            flags[(method, cond, "blocks")].append(recorded < a.alpha)
        for name, block in (*variants, ("per document", 1), *blocks):
            timed[name], out = scores(adapted, tokenizer, spec, docs, a.k, block, a.batch_size)
            seconds[name] += timed[name]
            if block:
                flags[(method, cond, name)].append(codec_test(out, cell["seed"])["p_test"] < a.alpha)
        model = adapted.unload()
        cache[base] = (model, tokenizer)
        print(f"{task}/{subsample} {method} {cond}: " + ", ".join(f"{k} {v:.1f} s" for k, v in timed.items()))
    w = seconds["without"]
    if w:
        print(
            f"\nexposure pass, all adapters: without CoDeC {w:.1f} s; per-document contexts "
            f"{seconds['per document']:.1f} s ({seconds['per document'] / w:.2f}x); blocks "
            f"{seconds['blocks']:.1f} s ({seconds['blocks'] / w:.2f}x)"
        )
    print(f"\n{'method':14} {'model':6} {'per document':>24} {'blocks':>24}")
    for method, cond in sorted({(m, c) for m, c, _ in flags}):
        cells = []
        for name in ("per document", "blocks"):
            hits = flags[(method, cond, name)]
            lo, hi = wilson(sum(hits), len(hits))
            cells.append(f"{sum(hits)}/{len(hits)} [{100 * lo:.0f}, {100 * hi:.0f}%]")
        print(f"{method:14} {cond:6} {cells[0]:>24} {cells[1]:>24}")


if __name__ == "__main__":
    main()

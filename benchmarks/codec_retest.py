"""CoDeC's test again on a results folder whose grid drew one context per block of documents
(`codec_block` > 1): each block's documents, recorded with their drops, are marked with their block, and
every CoDeC test (the units' conditions and calibrate's null models) is recomputed with whole blocks
permuted (contamination.codec.block_test). Units run with a context per document are left as they are.

Records written before CoDeC's test moved whole blocks treated a block's drops as independent, which
they are not (they share one context): on the base that test flagged more than its 5%. This rewrites
only the CoDeC entries and the block column; prints, per folder, how many records changed. Usage:
    python benchmarks/codec_retest.py studies/methods_study [--dry-run]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from contamination import codec
from contamination.exposure import CODEC, codec_test
from harness import results
from harness.core.plumbing.errors import read_json_object


def with_blocks(scores: dict, k: int, block: int) -> dict:
    """A condition's stored scores with each document's block beside its drop."""
    blocks = codec.block_ids(scores["split"], scores["row"], k, block)
    return scores | {codec.BLOCK_COLUMN: blocks.tolist()}


def retest_unit(record: dict) -> bool:
    """The unit's CoDeC entries recomputed over blocks; False where it drew a context per document."""
    settings, exposure = record.get("settings", {}), record.get("exposure")
    block, k = int(settings.get("codec_block", 1)), int(settings.get("codec_context", 0))
    if block <= 1 or k <= 0 or not exposure:
        return False
    docs, seed = exposure["docs"], int(settings.get("seed", 0))
    for cond, scores in exposure["scores"].items():
        if CODEC not in scores or CODEC not in exposure["tests"].get(cond, {}):
            continue
        scores = with_blocks(scores | {"split": docs["split"], "row": docs["row"]}, k, block)
        exposure["scores"][cond][codec.BLOCK_COLUMN] = scores[codec.BLOCK_COLUMN]
        exposure["tests"][cond][CODEC] = codec_test(pd.DataFrame(scores), seed)
    return True


def retest(root: Path, dry_run: bool) -> None:
    found = 0
    for tdir in sorted({p.parent.parent for p in root.rglob("units/*.json")}):
        units = nulls = 0
        settings = {}
        for path in results.unit_records(tdir):
            record = results.read_unit(path)
            if retest_unit(record):
                settings[record["subsample"]] = record["settings"]
                units += 1
                if not dry_run:
                    results.rewrite_unit(path, record)
        for path in results.null_records(tdir):
            s = settings.get(int(path.stem))
            null = read_json_object(path, str(path), "delete it to train the null model again")
            if s is None or CODEC not in null["scores"]:
                continue
            null["scores"] = with_blocks(null["scores"], int(s["codec_context"]), int(s["codec_block"]))
            nulls += 1
            if not dry_run:
                results.write_json(path, null)
        if units or nulls:
            found += 1
            word = "would be retested" if dry_run else "retested"
            print(f"{tdir.relative_to(root)}: {units} units, {nulls} null models {word}")
    if not found:
        print(f"no unit under {root} recorded CoDeC (codec_context): nothing to retest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="the results folder (a run's --out)")
    parser.add_argument("--dry-run", action="store_true", help="count what would change, write nothing")
    args = parser.parse_args()
    root = args.results.expanduser()
    if not root.is_dir():
        sys.exit(f"codec_retest: {root}: no such results folder; name a run's --out")
    if not any(root.rglob("units/*.json")):
        sys.exit(f"codec_retest: {root} holds no finished unit (units/*.json); name a run's --out")
    retest(root, args.dry_run)


if __name__ == "__main__":
    main()

"""`tapt-bench contamination test` and `contamination pvalue`: the exchangeability test of Oren et al."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.cli.parsing import command
from harness.core.errors import UserError
from harness.core.settings import from_namespace


def cmd_contamination_test(args: argparse.Namespace) -> None:
    from contamination.sharded_test import ContaminationArgs, run
    from harness.core.models import resolve
    from harness.results import write_json

    test = from_namespace(ContaminationArgs, args)
    test.base = resolve(test.base)
    result = run(test)
    if test.out:
        write_json(Path(test.out), result)
    print(
        f"pval {result['pval']:.6g}  t {result['t']:.4f}  shards {result['num_shards']}  "
        f"permutations {result['permutations_per_shard']}  {result['seconds']:.1f} s"
    )


def cmd_contamination_pvalue(args: argparse.Namespace) -> None:
    from contamination.stat import pvalue_from_log

    try:
        log = json.loads(Path(args.log).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(
            f"{args.log}: not a JSON test log ({type(err).__name__}: {err}); pass the .json file "
            "written by `contamination test --out` or a study log"
        ) from err
    if not isinstance(log, dict):
        raise UserError(f"{args.log}: a test log is a JSON object, got {type(log).__name__}")
    pval = pvalue_from_log(log, args.log)
    print(json.dumps({"pval": pval}) if args.json else f"pval {pval:.10g}")


def register(sub) -> None:
    from contamination.sharded_test import ContaminationArgs

    cont = sub.add_parser("contamination", help="the sharded exchangeability test (Oren et al. 2024)")
    cont = cont.add_subparsers(dest="action", required=True)
    command(
        cont,
        "test",
        cmd_contamination_test,
        "run the test on a task split for a model, optionally with an adapter",
        ContaminationArgs,
    )
    p = command(cont, "pvalue", cmd_contamination_pvalue, "recompute the p-value of a test log")
    p.add_argument("log")
    p.add_argument("--json", action="store_true")

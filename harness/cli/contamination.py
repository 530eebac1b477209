"""`tapt-bench contamination test` and `contamination pvalue` (the exchangeability test of Oren et al.),
and `contamination exposure` (the two-sample exposure test against the extra split)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.cli.parsing import command
from harness.core.errors import UserError
from harness.core.settings import from_namespace


def run_test(cls: type, run, args: argparse.Namespace) -> tuple:
    """A test's settings from the flags (the base resolved), its result, written to --out if given."""
    from harness.core.models import resolve
    from harness.results import write_json

    test = from_namespace(cls, args)
    test.base = resolve(test.base)
    result = run(test)
    if test.out:
        write_json(Path(test.out), result)
    return test, result


def cmd_contamination_test(args: argparse.Namespace) -> None:
    from contamination.sharded_test import ContaminationArgs, run

    test, result = run_test(ContaminationArgs, run, args)
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


def cmd_contamination_exposure(args: argparse.Namespace) -> None:
    from contamination.exposure import format_result
    from contamination.exposure_run import ExposureArgs, run

    test, result = run_test(ExposureArgs, run, args)
    if test.json:
        print(json.dumps({k: v for k, v in result.items() if k != "documents"}))
        return
    suspect = " + ".join(filter(None, [test.checkpoint or test.base, test.peft]))
    reference = "none (uncalibrated)" if test.uncalibrated else test.base
    print(
        f"exposure of {suspect} to {test.task} subsample {test.subsample} (n {test.n}, {test.format} "
        f"format), reference {reference}, {result['seconds']:.1f} s:\n{format_result(result)}"
    )


def register(sub) -> None:
    from contamination.exposure_run import ExposureArgs
    from contamination.sharded_test import ContaminationArgs

    cont = sub.add_parser(
        "contamination", help="contamination checks: the exposure test and the exchangeability test"
    )
    cont = cont.add_subparsers(dest="action", required=True)
    command(
        cont,
        "exposure",
        cmd_contamination_exposure,
        "did a model see the test split's text, or its labels? (test vs extra, against the base)",
        ExposureArgs,
    )
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

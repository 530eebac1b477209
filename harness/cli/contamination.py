"""`tapt-bench contamination ...`: `exposure` (the two-sample exposure test), `calibrate` (every
detector's error rates), `exchangeability` and `pvalue` (the exchangeability test of Oren et al.)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.parsing import command, strict_json
from harness.core.plumbing.errors import read_json_object
from harness.core.plumbing.settings import field_names, from_namespace


def check_out(out: str | None) -> None:
    """--out checked before anything is computed: a file that can be written, and not one the tool did
    not write (a copy of the study's log, say) unless it is one of its results."""

    from harness.core.plumbing.errors import UserError
    from harness.results import json_output_problem

    if not out:
        return
    problem = json_output_problem(out, "result.json", older=({"settings", "seconds"},))
    if problem:
        raise UserError(f"--out: {problem}")


def run_test(cls: type, run, args: argparse.Namespace) -> tuple:
    """A test's settings from the flags (the base resolved), its result, written to --out if given (the
    file checked before anything is computed)."""
    from harness.core.engine.models import resolve
    from harness.results import WRITTEN_BY, write_json

    test = from_namespace(cls, args)
    out = test.options.out
    check_out(out)
    test = test.replace(base=resolve(test.model.base))
    result = run(test)
    if out:
        write_json(Path(out), {"written_by": WRITTEN_BY, **result})
    return test, result


def cmd_contamination_exchangeability(args: argparse.Namespace) -> None:
    from contamination.exchangeability_run import ContaminationArgs, run

    if args.action == "test":
        print("note: `contamination test` is now `contamination exchangeability`; the old name still works")
    adapters_draw(args)  # an adapter's own draw, as exposure reads it (it tested the default n 100 before)
    test, result = run_test(ContaminationArgs, run, args)
    sample = test.sample
    suspect = " + ".join(filter(None, [test.model.base, test.options.peft]))
    draw = f"subsample {sample.subsample} (m {sample.m}, n {sample.n})"
    print(f"exchangeability of {suspect} on {sample.task}'s {sample.split} split of {draw}:")  # what it read
    print(
        f"pval {result['pval']:.6g}  t {result['t']:.4f}  shards {result['num_shards']}  "
        f"permutations {result['permutations_per_shard']}  {result['seconds']:.1f} s"
    )


def cmd_contamination_pvalue(args: argparse.Namespace) -> None:
    from contamination.exchangeability import pvalue_from_log

    fix = "pass the .json file written by `contamination exchangeability --out` or a study log"
    log = read_json_object(args.log, f"{args.log} (a test log)", fix)
    pval = pvalue_from_log(log, args.log)
    print(strict_json({"pval": pval}) if args.json else f"pval {pval:.10g}")


def adapters_draw(args: argparse.Namespace) -> None:
    """A checked adapter's or checkpoint's own draw (its tapt.json) as the defaults of the subsample's
    flags, so that the test reads the documents it was trained on; a flag that contradicts it is refused
    in one line naming both (as lm-eval's hook refuses --metadata)."""
    from harness.core.plumbing.settings import field_names
    from harness.tasks import adapters
    from harness.tasks.protocol import SplitSettings, find_spec, subsample_docs

    trained_by = getattr(args, "peft", None) or getattr(args, "checkpoint", None)
    whole = [getattr(args, k, None) for k in ("suspect_split", "reference_split", "reference_file")]
    if not trained_by or any(whole):
        return  # a whole split is no subsample: nothing of the draw is read
    named = adapters.given_flags(getattr(args, "argv", []))
    given = {k: getattr(args, k) for k in named}
    spec = find_spec(args.task, args.include_path)
    trained = adapters.trained_for(trained_by, given, args.task, spec.slug, flag="the flags")
    for key, value in trained.items():
        setattr(args, key, value)
    if trained:  # the draw the record names must give the rows it lists as trained on
        sample = SplitSettings(
            **{k: getattr(args, k) for k in field_names(SplitSettings) if hasattr(args, k)}
        )
        adapters.check_rows(trained_by, subsample_docs(spec, sample, sample.subsample))


def cmd_contamination_exposure(args: argparse.Namespace) -> None:
    from contamination.exposure_run import ExposureArgs, run
    from contamination.verdict import format_result

    adapters_draw(args)
    test, result = run_test(ExposureArgs, run, args)
    o, base = test.options, test.model.base
    if o.json:
        print(strict_json({k: v for k, v in result.items() if k != "documents"}))
        return
    suspect = " + ".join(filter(None, [o.checkpoint or base, o.peft]))
    reference = "none (uncalibrated)" if o.uncalibrated else base
    names = result["names"]
    print(
        f"exposure of {suspect} to {o.task}: suspect {names['test']}, reference {names['extra']}"
        + ("" if o.whole_split() else f" of subsample {o.subsample} (n {test.sample.n})")
        + " "
        f"({o.format} format), calibrated by {reference}, {result['seconds']:.1f} s:\n"
        + format_result(result)
    )


def cmd_contamination_calibrate(args: argparse.Namespace) -> None:
    import harness
    from contamination.detectors import format_rates
    from harness.cli.run import config_keys, own
    from harness.study.calibrate import CalibrateOptions

    opts = from_namespace(CalibrateOptions, args)
    done = harness.calibrate(opts.config, **own(CalibrateOptions, args), **config_keys(args))
    result = done.result
    for note in result["notes"]:
        print(f"note: {note}")
    print(format_rates(result["rates"]))
    if len({r["task"] for r in result["rates_by_task"]}) > 1:
        print("\nper task:\n" + format_rates(result["rates_by_task"]))
    print(f"per task and condition: {done.path}; {result['seconds']:.0f} s")


def cmd_contamination_show(args: argparse.Namespace) -> None:
    from contamination import codec

    print(f"CoDeC (Zawalski et al. 2025): its recipe against the authors' demo:\n{codec.RECIPE}")


def add_commands(sub) -> None:
    from contamination.exchangeability_run import ContaminationArgs
    from contamination.exposure_run import ExposureArgs
    from harness.grid.configuration.config import GridConfig
    from harness.study.calibrate import CalibrateOptions

    about = (
        "did a model see a test set's text, or its labels? The exposure test, every detector's error "
        "rates, and the exchangeability test"
    )
    cont = sub.add_parser("contamination", help=about, description=about)
    cont = cont.add_subparsers(dest="action", required=True)
    command(
        cont,
        "exposure",
        cmd_contamination_exposure,
        "did a model see a test split's text, or its labels? Its scores on the suspect documents against a "
        "reference it cannot have seen (a subsample's extra split, another split, or a file), each "
        "calibrated by the base",
        ExposureArgs,
    )
    p = command(
        cont,
        "calibrate",
        cmd_contamination_calibrate,
        "every detector's false-positive rate and power on models of known exposure (trains a grid per "
        "TAPT mode)",
        CalibrateOptions,
        GridConfig,
    )
    shown = {"tasks", "subsamples", "codec_context", "out", "data_dir"}  # the keys calibrate is run with
    for key in field_names(GridConfig):  # the others: accepted as flags, listed once, by `run --help`
        if key not in shown:
            p.flags[key].help = argparse.SUPPRESS
    grid = p.sections["grid"]
    grid.title = "config keys calibrate is most often run with"
    grid.description = (
        "every config key is a flag here too, as `tapt-bench run --help` lists them (--data-dir is "
        "data_dir); a flag given overrides the config file"
    )
    command(
        cont,
        "exchangeability",
        cmd_contamination_exchangeability,
        "the exchangeability test (Oren et al. 2024): does a model prefer a split's examples in their "
        "canonical order to shuffled orders? (also `contamination test`, its former name)",
        ContaminationArgs,
        aliases=["test"],
    )
    p = command(cont, "show", cmd_contamination_show, "a detector's recipe against its authors' code")
    p.add_argument("name", choices=["codec"], help="the detector")
    p = command(
        cont,
        "pvalue",
        cmd_contamination_pvalue,
        "recompute the p-value of an exchangeability test from its log (the JSON that `exchangeability "
        "--out` writes, or one of the study's logs)",
    )
    p.add_argument("log", help="the test's log: a JSON file")
    p.add_argument("--json", action="store_true", help="print the p-value as JSON")

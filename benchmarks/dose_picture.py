"""The bias, the planted leak and the boost against a method's dose, with their two-sided 95% intervals,
as a PNG (the picture the report draws, for docs/results.md). Usage:
    python benchmarks/dose_picture.py studies/methods_confirm --out docs/img/dose.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core.plumbing.errors import UserError
from harness.results import file_problem
from harness.stats.bayes import plots
from harness.stats.summary import summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a results folder whose config swept a dose (its `doses`)")
    parser.add_argument("--out", required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    try:
        configs = [c for c in summary.of_folder(Path(args.results).expanduser())["configs"]]
    except UserError as err:
        sys.exit(f"dose_picture: {err}")
    dosed = [c for c in configs if plots.dose_of(c["model"])]
    if not dosed:
        sys.exit(f"dose_picture: {args.results} holds no model run at several doses (a config's `doses`)")
    out = Path(args.out).expanduser()
    problem = file_problem(out)
    if problem:
        sys.exit(f"dose_picture: --out {out}: {problem}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(plots.png(plots.dose_response(dosed)))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

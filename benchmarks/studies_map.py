"""The map of studies/: one row per run folder (a model folder with a manifest), from its records: what the
study asks, the config that made it, its commit, its units, whether it is confirmed, its headline numbers,
and the command that recomputes them. `--write` writes studies/README.md; a test checks it against the
records.

    python benchmarks/studies_map.py [--write]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import harness  # noqa: E402
from harness import results  # noqa: E402
from harness.core.plumbing.settings import Settings, option, parse_script  # noqa: E402
from harness.stats.summary.confirmation import confirmation  # noqa: E402

STUDIES = ROOT / "studies"
# what each study folder asks, and the shipped config it ran (hand-kept: the records hold neither)
ASKS = {
    "methods_confirm": (
        "the methods study's confirmatory run: does each method's TAPT on test inflate it?",
        "methods_confirm",
    ),
    "methods_generative": (
        "test-time RL on a generative task: bias and its premise (maj@N above greedy?)",
        "methods_generative_ttrl",
    ),
    "methods_study": (
        "the methods study, exploratory: prompt TAPT, self-training and test-time RL",
        "methods_study",
    ),
    "methods_study_tlm": ("the methods study's test-time learning (TLM) at n 128", "methods_study_tlm"),
    "table1_minilm": (
        "the study's Table 1 on MiniLM, first replication (m 50 and m 100)",
        "table1_minilm, table1_minilm_m100",
    ),
    "table1_minilm_control_pilot": (
        "the pilot of Table 1 with a matched, checked planted control (in progress)",
        "table1_minilm_control",
    ),
    "table1_minilm_pilot": ("the pilot that sized the second replication of Table 1", "table1_minilm_design"),
    "table1_minilm_plan": (
        "the study's Table 1 on MiniLM, second replication: confirmatory, balanced draw",
        "table1_minilm_plan",
    ),
    "ttrl_free": (
        "test-time RL with free sampling (not among the choices): its bias",
        "methods_study (test-time-rl, free)",
    ),
    "ttrl_premise": (
        "test-time RL's premise on the base alone: is maj@N above greedy?",
        "benchmarks/ttrl_premise.py",
    ),
}
HEADER = (
    "# The studies' records\n\n"
    "Each row is one run folder of `studies/`: its records ship, and the command beside it recomputes its\n"
    "headline from them. Written by `python benchmarks/studies_map.py --write` from the records; a test\n"
    "checks it against them. The results page (docs/results.md) reads them.\n"
)


@dataclass(kw_only=True)
class MapArgs(Settings):
    write: bool = option(False, "write studies/README.md (default: print it)")


def points(tables: dict, effect: str) -> str:
    """`effect mean [low, high] pts` of a run's one config, or '' where it has none."""
    mean = tables.get(f"{effect}_mean")
    if mean is None or mean != mean:  # absent, or NaN
        return ""
    low, high = tables[f"{effect}_low"], tables[f"{effect}_high"]
    return f"{effect} {100 * mean:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}] pts"


def run_row(study: str, mdir: Path) -> str:
    """One run folder's row."""
    rel = mdir.relative_to(ROOT).as_posix()
    units = sum(len(results.finished(t)) for t in results.task_dirs(mdir))
    found = confirmation(mdir)
    runs = [r for m in results.manifests(mdir) for r in [m, *m.get("earlier_runs", [])]]
    commits = dict.fromkeys((r.get("code") or {}).get("commit") or "?" for r in runs)
    commit = ", ".join(c[:7] for c in commits)
    (config,) = (harness.summarize(mdir).tables["configs"] if units else []) or [{}]  # a run just begun
    verdict = config.get("bias_verdict", "")
    headline = "; ".join(filter(None, [points(config, "bias"), verdict, points(config, "leak")]))
    asks, made_by = ASKS[study]
    cells = [f"`{rel}`", asks, f"`{made_by}`", f"`{commit}`", str(units), found["status"], headline]
    return "| " + " | ".join([*cells, f"`tapt-bench summarize {rel}`"]) + " |"


def other_row(study: str) -> str:
    """A study folder of no grid run (its own script's records)."""
    asks, made_by = ASKS[study]
    files = sorted(p.name for p in (STUDIES / study).iterdir())
    recompute = f"`python {made_by} --from-records studies/{study}/{files[0]}`"
    return f"| `studies/{study}` | {asks} | `{made_by}` | | {len(files)} files | | | {recompute} |"


def studies_map() -> str:
    rows = []
    for folder in sorted(p for p in STUDIES.iterdir() if p.is_dir()):
        runs = sorted(m.parent for m in folder.rglob("manifest-shard*.json"))
        rows += [run_row(folder.name, mdir) for mdir in dict.fromkeys(runs)] or [other_row(folder.name)]
    head = "| run folder | what it asks | config | commit | units | confirmed | headline | recompute |"
    return "\n".join([HEADER, head, "|---|---|---|---|---|---|---|---|", *rows]) + "\n"


def main() -> None:
    args = parse_script(MapArgs, __doc__)
    text = studies_map()
    if args.write:
        (STUDIES / "README.md").write_text(text)
        print(f"wrote {STUDIES / 'README.md'}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()

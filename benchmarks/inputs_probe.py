"""Bad inputs, each run as a user runs it, against the code in --code (a checkout: this one, or a worktree
of an older commit, to compare): for each, the exit code, the files it left in its output, whether a
traceback showed, and the last line it said. A probe is a command line and what it needs made first.

    python benchmarks/inputs_probe.py --tiny DIR --data-dir tests/data [--code PATH] [--only NAME ...]

--tiny: a tiny causal LM folder; where it holds none, the tests' tiny Llama is made there first.
Prints a markdown table; nothing here imports the code under test (it runs in subprocesses).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
BIN = Path(PY).parent

TOY_FLOW = ROOT / "tests" / "test_toy_flow.py"  # its TOY flow, read as text: the probes' plug-in flow


def toy_flow(name: str, edit: tuple[str, str] = ("", "")) -> str:
    """The tests' toy flow under its own name (each probe runs in a new process), with one edit."""
    text = TOY_FLOW.read_text().split("TOY = '''", 1)[1].split("'''", 1)[0].replace('"toy"', f'"{name}"')
    return text.replace(*edit) if edit[0] else text


STAT = (
    "from harness.api import Statistic, register_statistic\nregister_statistic(Statistic({key!r}, {head!r}, "
)
STAT += "'points', lambda e: e == 'bias', lambda t, c, s: 0.0, pooled=lambda e: True))\n"
JSONL = "\n".join(json.dumps({"q": f"question {i}?", "a": ["yes", "no"][i % 2]}) for i in range(60))


def plain(name: str, rest: str) -> str:
    """A plain lm-eval task YAML over the probe's d.jsonl."""
    return (
        f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files: d.jsonl\ntest_split: train\n{rest}"
    )


def grid(w: Path, out: str, extra: dict | None = None) -> Path:
    cfg = {"base": "{TINY}", "model_tag": "tiny", "tasks": ["ag_news"], "m": 4, "n": 6, "subsamples": 2}
    cfg |= {"conditions": ["base", "extra", "test"], "quantize": "none", "data_dir": "{DATA}", "out": out}
    if "flow" not in (extra or {}):  # a plug-in flow runs its own method
        cfg["method_settings"] = {"prompt-tapt": {"lr": 0.01, "batch_size": 4}}
    cfg |= extra or {}
    path = w / f"{out}.yaml"
    path.write_text(json.dumps(cfg))
    return path


TAPT = "{PY} -m harness.cli"
TRAIN = f"{TAPT} train --task ag_news --split test --m 4 --n 6 --quantize none --data-dir {{DATA}}"
LM_EVAL = '{BIN}/lm_eval --model hf --tasks tapt_ag_news --metadata \'{{"data_dir":"{DATA}"}}\''


EXPOSURE = f"{TAPT} contamination exposure --task ag_news --data-dir {{DATA}}"
ADAPTER = [f"{TRAIN} --base {{TINY}} --out ad"]  # an adapter of ag_news at m 4 / n 6, from the code probed
GRID = [f"{TAPT} run --config {{W}}/g.yaml --no-summary"]  # a tiny zero-shot grid into g/


def cut(path: Path, keep: int = 5000) -> None:
    with open(path, "r+b") as f:
        f.truncate(keep)


def edit_json(path: Path, **changes) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def lose_table(w: Path) -> None:
    """Unit 1's per-document table deleted, its record kept: half a unit."""
    for path in (w / "g").rglob("units/1.parquet"):
        path.unlink()


def lock(w: Path) -> None:
    """A live run's lock (this process's) in each model folder of g/."""
    held = json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "started": "now"})
    for units in (w / "g").rglob("units"):
        (units.parent.parent / ".lock-shard0of1").write_text(held)


@dataclass
class Probe:
    name: str
    command: str
    files: dict = field(default_factory=dict)  # relative path: text, written first
    configs: Callable | None = None  # writes the grid configs the setup or the command reads
    setup: list = field(default_factory=list)  # commands run first, by the code probed
    damage: Callable | None = None  # the bad input, made after the setup
    lost: Callable | None = None  # what the command must leave as it was: a problem's words, else None


SUMMARIZE = f"{TAPT} summarize {ROOT}/studies/methods_confirm --statistics"
GEN = "output_type: generate_until\ndoc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n"
PROBES = [
    Probe("statistic key {x}", f"{SUMMARIZE} x.py", {"x.py": STAT.format(key="{x}_gap", head="gap")}),
    Probe(
        "statistic header {boost}", f"{SUMMARIZE} b.py", {"b.py": STAT.format(key="{e}_gap", head="{boost}")}
    ),
    Probe(
        "statistic key with a lone brace",
        f"{SUMMARIZE} c.py",
        {"c.py": STAT.format(key="{e}_gap{", head="g")},
    ),
    Probe("statistics given a folder", f"{SUMMARIZE} stats", {"stats/x.txt": ""}),
    Probe(
        "validate: one task name in two folders",
        f"{TAPT} tasks validate a --include-path b --data-dir {{DATA}}",
        setup=[f"{TAPT} tasks new twice --out a", f"{TAPT} tasks new twice --out b"],
    ),
    Probe(
        "show: --include-path given twice, one name in both",
        f"{TAPT} tasks show --task twice --include-path a --include-path b --data-dir {{DATA}}",
        setup=[f"{TAPT} tasks new twice --out a", f"{TAPT} tasks new twice --out b"],
    ),
    Probe(
        "validate: output_type loglikelihood_rolling",
        f"{TAPT} tasks validate odd",
        {"d.jsonl": JSONL, "odd/odd.yaml": plain("my_odd", "output_type: loglikelihood_rolling\n")},
    ),
    Probe("validate: a folder with no task", f"{TAPT} tasks validate empty", {"empty/notes.txt": ""}),
    Probe(
        "show: generative task without metric_list",
        f"{TAPT} tasks show --task my_gen --include-path g --m 10 --n 10",
        {"d.jsonl": JSONL, "g/gen.yaml": plain("my_gen", GEN)},
    ),
    Probe(
        "show: a target lm-eval cannot build",
        f"{TAPT} tasks show --task my_bad --include-path g --m 10 --n 10",
        {
            "d.jsonl": JSONL,
            "g/bad.yaml": plain(
                "my_bad",
                "output_type: multiple_choice\ndoc_to_text: '{{q}}'\n"
                "doc_to_choice: '{{a}}'\ndoc_to_target: 7\n",
            ),
        },
    ),
    Probe(
        "validate: a filter regex that never matches",
        f"{TAPT} tasks validate g/never.yaml --m 10 --n 10",
        {
            "d.jsonl": JSONL,
            "g/never.yaml": plain(
                "my_never",
                GEN + "filter_list:\n  - name: x\n    filter:\n"
                "      - function: regex\n        regex_pattern: 'NEVER(\\d+)'\n"
                "      - function: take_first\n",
            ),
        },
    ),
    Probe(
        "an include loop beside the shipped tasks",
        f"{TAPT} tasks show --task ag_news --include-path loop --data-dir {{DATA}} --m 4 --n 6",
        {"loop/a.yaml": "include: b.yaml\ntask: tapt_a\n", "loop/b.yaml": "include: a.yaml\n"},
    ),
    Probe(
        "train: base weights cut short",
        f"{TRAIN} --base base --out ad2",
        setup=["cp -r {TINY} base"],
        damage=lambda w: cut(w / "base" / "model.safetensors"),
    ),
    Probe(
        "train: --out a folder it did not write",
        f"{TRAIN} --base {{TINY}} --out mine",
        {"mine/notes.txt": "x"},
    ),
    Probe(
        "exposure: adapter weights cut short",
        f"{EXPOSURE} --base {{TINY}} --peft ad --out e.json",
        setup=ADAPTER,
        damage=lambda w: cut(w / "ad" / "adapter_model.safetensors"),
    ),
    Probe(
        "exposure: --n not the adapter's",
        f"{EXPOSURE} --base {{TINY}} --peft ad --n 12",
        setup=ADAPTER,
    ),
    Probe(
        "exposure: a PEFT adapter as --checkpoint",
        f"{EXPOSURE} --checkpoint ad --m 4 --n 6",
        setup=ADAPTER,
    ),
    Probe(
        "exchangeability --out over a file it did not write",
        f"{TAPT} contamination exchangeability --task ag_news --base {{TINY}} --data-dir {{DATA}} "
        "--out mine.json",
        {"mine.json": "{}"},
    ),
    Probe(
        "lm_eval peft=: weights cut short",
        f"{LM_EVAL} --model_args peft=ad",
        setup=ADAPTER,
        damage=lambda w: cut(w / "ad" / "adapter_model.safetensors"),
    ),
    Probe(
        "lm_eval peft=: another adapter's tapt.json",
        f"{LM_EVAL} --model_args peft=ad",
        setup=ADAPTER,
        damage=lambda w: edit_json(w / "ad" / "tapt.json", adapter_sha256="f" * 64),
    ),
    Probe(
        "lm_eval peft=: its base is gone",
        f"{LM_EVAL} --model_args peft=ad",
        setup=ADAPTER,
        damage=lambda w: edit_json(w / "ad" / "adapter_config.json", base_model_name_or_path="/gone"),
    ),
    Probe(
        "run: flow misspelled",
        f"{TAPT} run --config {{W}}/cfg.yaml",
        configs=lambda w: grid(w, "cfg", {"flow": "clasifier"}),
    ),
    Probe(
        "run: a flow's default_method is no method",
        f"{TAPT} run --config {{W}}/cfg.yaml",
        {"f.py": toy_flow("p_dm", ('f"{__file__}:METHOD"', '"nope"'))},
        configs=lambda w: grid(w, "cfg", {"flow": "f.py:FLOW"}),
    ),
    Probe(
        "run: the same flow file read from another folder",
        f"{TAPT} run --config {{W}}/two.yaml --no-summary",
        {"a/f.py": toy_flow("p_mv"), "b/f.py": toy_flow("p_mv")},
        configs=lambda w: (
            grid(w, "one", {"flow": "a/f.py:FLOW", "subsamples": 1}),
            grid(w, "two", {"flow": "b/f.py:FLOW", "out": "one"}),
        ),
        setup=[f"{TAPT} run --config {{W}}/one.yaml --no-summary"],
    ),
    Probe(
        "run: a flow returning NaN in correct",
        f"{TAPT} run --config {{W}}/cfg.yaml",
        {
            "f.py": toy_flow(
                "p_nan",
                (
                    '"correct": test["label"] == pick',
                    '"correct": np.where(test["label"] == pick, 1.0, np.nan)',
                ),
            )
        },
        configs=lambda w: grid(w, "cfg", {"flow": "f.py:FLOW"}),
    ),
    Probe(
        "summarize: a unit's table lost",
        f"{TAPT} summarize g",
        configs=lambda w: grid(w, "g"),
        setup=GRID,
        damage=lose_table,
    ),
    Probe(
        "summarize: a user's note in units/",
        f"{TAPT} summarize g",
        configs=lambda w: grid(w, "g"),
        setup=GRID,
        damage=lambda w: [(p / "my_notes.json").write_text("{}") for p in (w / "g").rglob("units")],
    ),
    Probe(
        "merge into a folder a live run holds",
        f"{TAPT} merge g --out g",
        configs=lambda w: grid(w, "g"),
        setup=GRID,
        damage=lock,
    ),
    Probe(
        "table1_compare: a cell the study lacks",
        f"{{PY}} {ROOT}/benchmarks/table1_compare.py --results g --model tiny",
        configs=lambda w: grid(w, "g"),
        setup=GRID,
    ),
]


DAMAGE = "disagree with their hash or their tables"
SIX_TAKEN = {  # round six's inputs the tool should take, and what it must say of each
    "2: exchangeability --peft reads the adapter's draw": "(m 4, n 6)",
    "8: summarize the shipped generative methods study": "premise",
    "8: summarize the shipped ttrl_free study": "premise: not checked",
    "9: a unit parquet cut to 500 bytes": DAMAGE,
    "9: a unit's draw edited": "its draw says train",
    "9: a unit's settings edited, its hash kept": "its settings were edited",
    "9: a unit's test accuracy edited in its record only": "are in no row of",
    "16: summarize into a pipe closed after two lines": "intervals",
    "symlink: summarize a linked run folder": "ag_news",
    "symlink: a run and a link to it in one folder": "2 rows",
    "symlink: merge a run with a link to it": "merged",
    "1: merge of a run copied twice": "merged",
    "u: a premise whose vote and greedy answer are both right 0.0%": "no more often right than",
    "symlink: run's out a link to its finished run": "log:",
    "siblings: two cells of one run (n 6 and n 8)": "m=4 n=8",
    "siblings: two model tags of one base": "model=tiny2",
    "user's file: merge --out a folder of theirs": "merged",
    "user's file: run's out a folder of theirs": "log:",
    "user's file: calibrate --out a folder of theirs": "calibration.json",
    "first steps: summarize --json into a closed pipe": "",
    "first steps: tasks list into a closed pipe": "",
    "first steps: exposure --out in a folder not there": "CoDeC",
    "record edited: a unit's extra": DAMAGE,
    "record edited: a unit's test": DAMAGE,
    "record edited: a unit's majority": DAMAGE,
    "record edited: a unit's subsample": DAMAGE,
    "record edited: a unit's settings_hash": DAMAGE,
    "record edited: a unit's settings.m": DAMAGE,
    "record edited: a unit's settings.seed": DAMAGE,
    "record edited: a unit's num_classes": DAMAGE,
    "record edited: a unit's chance": DAMAGE,
    "record edited: a unit's draw.train": DAMAGE,
    "record edited: a shipped unit's commit": "exploratory",
    "record edited: a shipped manifest's plan": "exploratory",
}


# the inputs the tool should take (exit 0), each with words its answer must hold; any other input should be
# refused (exit 1 or 2) in one line. An input refused that should be taken, or taken that should be
# refused, is "silent" in the table below; a traceback is one whatever the exit code.
ACCEPTED = {
    "show: generative task without metric_list": "lm_eval --model hf",
    "an include loop beside the shipped tasks": "<- target",
    "run: the same flow file read from another folder": "log:",
    "summarize: a user's note in units/": "ag_news",
    "table1_compare: a cell the study lacks": "released no BERT units of this cell",
    "7: a unit's table lost, then the grid rerun": "log:",
    "8: --shard 0/2 --overwrite beside shard 1's units": "log:",
    "run: tasks a string": "log:",
    "exposure: neither --base nor --checkpoint": "CoDeC",
    "lm_eval peft=: its tapt.json deleted": "note: ad has no tapt.json",
    **SIX_TAKEN,
}


def verdict(row: dict) -> str:
    """refused (one line), taken (as it should be), silent, traceback, or the setup failing."""
    if row["rc"] == "setup failed":
        return "setup failed"
    if row.get("lost"):
        return "lost"
    if row["tb"]:
        return "traceback"
    want = ACCEPTED.get(row["probe"])
    if want is not None:
        return "taken" if row["rc"] == 0 and (row.get("holds") or want in row["said"]) else "silent"
    return "refused" if row["rc"] else "silent"


def table(before: list[dict], after: list[dict]) -> str:
    """The before/after markdown table of two runs' rows (--json), with the counts of each verdict."""
    old = {r["probe"]: r for r in before}
    lines = [
        "| input | before: rc, files left, verdict | after: rc, files left, verdict | after: what it says |",
        "|---|---|---|---|",
    ]
    for r in after:
        b = old.get(r["probe"])
        was = f"{b['rc']}, {b['left']}, {verdict(b)}" if b else "not run"
        lines.append(f"| {r['probe']} | {was} | {r['rc']}, {r['left']}, {verdict(r)} | {r['said'][:150]} |")
    for name, rows in (("before", [old[r["probe"]] for r in after if r["probe"] in old]), ("after", after)):
        counts = {}
        for r in rows:
            counts[verdict(r)] = counts.get(verdict(r), 0) + 1
        lines.append(f"\n{name}: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())))
    return "\n".join(lines)


def run_probe(probe: Probe, env: dict, tiny: str, data: str) -> dict:
    w = Path(tempfile.mkdtemp(prefix="probe-"))
    fill = {"PY": PY, "BIN": str(BIN), "TINY": tiny, "DATA": data, "W": str(w)}
    for rel, text in probe.files.items():
        (w / rel).parent.mkdir(parents=True, exist_ok=True)
        (w / rel).write_text(text)
    if probe.configs:
        probe.configs(w)
        for cfg in w.rglob("*.yaml"):
            cfg.write_text(cfg.read_text().replace("{TINY}", tiny).replace("{DATA}", data))
    for step in probe.setup:
        done = subprocess.run(step.format(**fill), shell=True, cwd=w, env=env, capture_output=True, text=True)
        if done.returncode:
            return {"probe": probe.name, "rc": "setup failed", "left": "", "tb": "", "said": last(done)}
    if probe.damage:
        probe.damage(w)
    before = set(w.rglob("*"))
    start = time.time()
    try:
        done = subprocess.run(
            probe.command.format(**fill),
            shell=True,
            cwd=w,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except subprocess.TimeoutExpired as err:  # a FIFO opened and never read, a run that never ends
        done = subprocess.CompletedProcess(
            err.cmd, "hung", err.stdout or "", f"hung: killed after {err.timeout} s"
        )
    left = sorted(str(p.relative_to(w)) for p in set(w.rglob("*")) - before if p.is_file())
    for line in Path("/proc/mounts").read_text().splitlines():  # the full-disk probe's tmpfs
        if line.split()[1].startswith(str(w)):
            subprocess.run(["umount", line.split()[1]], check=False)
    out = {"probe": probe.name, "rc": done.returncode, "left": len(left), "tb": "Traceback" in done.stderr}
    out["lost"] = (probe.lost(w) if probe.lost else None) or ("hung" if done.returncode == "hung" else None)
    want = ACCEPTED.get(probe.name)
    out["holds"] = want is not None and want in done.stdout + done.stderr  # anywhere in what it printed
    out["files"] = [re.sub(r"\d{8}-\d{6}", "DATE", f) for f in left]
    out |= {"said": last(done).replace(f"{w}/", ""), "seconds": round(time.time() - start, 1)}
    shutil.rmtree(w, ignore_errors=True)
    return out


def last(done: subprocess.CompletedProcess) -> str:
    """What the command said of the input: validate's first problem or the first note, else the last line
    of its errors, else of its output."""
    problems = [ln.strip()[2:] for ln in done.stdout.splitlines() if ln.startswith("     - ")]
    problems += [ln for ln in done.stderr.splitlines() if ln.startswith(("note:", "--overwrite:"))]
    lines = [ln for ln in (done.stderr if done.returncode else done.stdout).splitlines() if ln.strip()]
    said = problems[0] if problems else (lines or [""])[-1]
    return said.replace("|", "/")[:200]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", help="a tiny causal LM folder (made there if it is not one)")
    p.add_argument("--data-dir", default=str(ROOT / "tests" / "data"))
    p.add_argument("--code", default=str(ROOT), help="the checkout whose code runs (PYTHONPATH)")
    p.add_argument("--only", nargs="+", default=[], help="probes whose name holds one of these")
    p.add_argument("--round", choices=["all", "six"], default="all", help="six: round six's probes alone")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument(
        "--table", nargs=2, metavar=("BEFORE", "AFTER"), help="print two runs' --json side by side"
    )
    args = p.parse_args()
    if args.table:
        before, after = (json.loads(Path(f).read_text()) for f in args.table)
        if args.round == "six":  # round six's rows alone, in their order
            from round_six_cases import ISSUE, MORE

            order = {p.name: i for i, p in enumerate([*ISSUE, *MORE])}
            after = sorted((r for r in after if r["probe"] in order), key=lambda r: order[r["probe"]])
        print(table(before, after))
        return
    if not args.tiny:
        p.error("--tiny FOLDER is needed to run the probes (a tiny causal LM; made there if absent)")
    if not (Path(args.tiny) / "config.json").is_file():
        sys.path.insert(0, str(ROOT / "tests"))
        from helpers import make_tiny_llama  # the tests' tiny Llama

        Path(args.tiny).mkdir(parents=True, exist_ok=True)
        make_tiny_llama(Path(args.tiny))
    env = {**os.environ, "PYTHONPATH": str(Path(args.code).resolve()), "HF_HUB_OFFLINE": "1"}
    os.environ["TAPT_PROBE_CODE"] = str(
        Path(args.code).resolve()
    )  # a probe's task YAML includes its template
    rows = []
    print("| probe | rc | files left | traceback | the last line said |\n|---|---|---|---|---|")
    from input_cases import CASES, NEW  # round five's items and the new inputs
    from round_six_cases import ISSUE, MORE  # round six's

    for probe in [*ISSUE, *MORE] if args.round == "six" else [*PROBES, *CASES, *NEW, *ISSUE, *MORE]:
        if args.only and not any(o in probe.name for o in args.only):
            continue
        row = run_probe(probe, env, str(Path(args.tiny).resolve()), str(Path(args.data_dir).resolve()))
        rows.append(row)
        shown = [row["probe"], row["rc"], row["left"], "yes" if row["tb"] else "no", row["said"]]
        print("| " + " | ".join(map(str, shown)) + " |", flush=True)
        if args.json:  # after each probe: a run stopped part way keeps its rows
            Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

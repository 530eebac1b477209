"""The bad inputs of round five's issue (each numbered item not probed in inputs_probe.py) and of the
surfaces the Table 1 and test-time RL issues added (the pilot, the study's draw, the leak's strength, the
premise's settings), as probes run by inputs_probe.py. Each is one command and what it needs made first."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

from inputs_probe import (
    ADAPTER,
    EXPOSURE,
    GEN,
    GRID,
    JSONL,
    LM_EVAL,
    ROOT,
    TAPT,
    TRAIN,
    Probe,
    grid,
    lose_table,
    plain,
    toy_flow,
)

TASKS_DIR = ROOT / "tasks_yaml"
RUN = f"{TAPT} run --config {{W}}/cfg.yaml --no-summary"
PILOT = f"{TAPT} pilot --config {{W}}/cfg.yaml --plan plan.yaml --plan-seed 7"
STAT_P = (
    "from harness.api import Statistic, register_statistic\nregister_statistic(Statistic('odd_p', 'odd p', "
    "'p', lambda e: e == 'bias', lambda t, c, s: 7.5, pooled=lambda e: True))\n"
)
SUMMARIZE = f"{TAPT} summarize {ROOT}/studies/methods_confirm"


def cfg(extra: dict | None = None, out: str = "cfg"):
    """A config writer for Probe.configs: the probes' tiny zero-shot grid with `extra` keys."""
    return lambda w: grid(w, out, extra)


def flow_cfg(extra: dict | None = None):
    return cfg({"flow": "f.py:FLOW", **(extra or {})})


def flow_file(edit: tuple[str, str]) -> dict:
    """f.py: the toy flow with one edit, under a name of its own (a name is registered once a process)."""
    name = f"p_{zlib.crc32(repr(edit).encode())}"
    return {"f.py": toy_flow(name, tuple(e.replace('"toy"', f'"{name}"') for e in edit))}


def my_task(w: Path) -> None:
    """A copy of the shipped ag_news task as tapt_my_ag in tasks/ (its data: ag_news's, in data/my_ag)."""
    text = (TASKS_DIR / "tapt_ag_news.yaml").read_text().replace("tapt_ag_news", "tapt_my_ag")
    template = (
        Path(os.environ.get("TAPT_PROBE_CODE", ROOT)) / "tasks_yaml" / "_template_yaml"
    )  # the code probed's
    text = text.replace("include: _template_yaml", f"include: {template}")
    text = text.replace("slug: ag_news", "slug: my_ag")
    (w / "tasks").mkdir(exist_ok=True)
    (w / "tasks" / "tapt_my_ag.yaml").write_text(text)


def edit_instruction(w: Path) -> None:
    path = w / "tasks" / "tapt_my_ag.yaml"
    path.write_text(path.read_text().replace("Answer with its topic.", "Say its topic."))


def other_weights(w: Path) -> None:
    from safetensors.torch import load_file, save_file

    path = w / "base" / "model.safetensors"
    weights = load_file(path)
    save_file({k: v + 0.01 for k, v in weights.items()}, path, metadata={"format": "pt"})


def reorder_data(w: Path) -> None:
    import pandas as pd

    path = w / "data" / "ag_news" / "data.parquet"
    pd.read_parquet(path).sample(frac=1, random_state=1).to_parquet(path)


def full_disk(w: Path) -> None:
    """g/ on a 200 KB tmpfs, filled to 12 KB free (root only; elsewhere the probe says so)."""
    (w / "g").mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(w / "g")])
    if mounted.returncode:
        raise SystemExit("the full-disk probe mounts a tmpfs: run it as root")
    free = os.statvfs(w / "g").f_bavail * os.statvfs(w / "g").f_frsize
    (w / "g" / "fill").write_bytes(b"\0" * (free - 12 * 1024))


def two_runs(name: str, keys: dict, damage, copy: str = "", made=None, files: dict | None = None) -> Probe:
    """A run of one subsample into one/, `damage` (an input edited), then a run of two into the same folder
    (`copy`: a command making the inputs first; `made`: a writer of files the configs name)."""

    def configs(w: Path) -> None:
        if made:
            made(w)
        grid(w, "one", keys | {"subsamples": 1})
        grid(w, "two", keys | {"out": "one"})

    first = f"{TAPT} run --config {{W}}/one.yaml --no-summary"
    setup = [copy, first] if copy else [first]
    return Probe(
        name, f"{TAPT} run --config {{W}}/two.yaml --no-summary", files or {}, configs, setup, damage
    )


CASES = [
    # round five's items, as its issue wrote them
    two_runs(
        "1: a flow's file edited between two runs",
        {"flow": "f.py:FLOW"},
        lambda w: (w / "f.py").write_text((w / "f.py").read_text() + "\n# an edit\nX = 1\n"),
        files={"f.py": toy_flow("p_ed")},
    ),
    two_runs(
        "5: the data file reordered between two runs", {"data_dir": "data"}, reorder_data, "cp -r {DATA} data"
    ),
    two_runs(
        "5: other weights under the base's name between two runs",
        {"base": "base"},
        other_weights,
        "cp -r {TINY} base",
    ),
    two_runs(
        "5: a task YAML edited between two runs",
        {"tasks": ["my_ag"], "include_path": ["tasks"], "data_dir": "data"},
        edit_instruction,
        "mkdir -p data && cp -r {DATA}/ag_news data/my_ag",
        made=my_task,
    ),
    Probe(
        "7: a unit's table lost, then the grid rerun",
        f"{TAPT} run --config {{W}}/g.yaml --no-summary",
        configs=lambda w: grid(w, "g"),
        setup=GRID,
        damage=lose_table,
    ),
    Probe(
        "8: --shard 0/2 --overwrite beside shard 1's units",
        f"{TAPT} run --config {{W}}/g.yaml --no-summary --shard 0/2 --overwrite",
        configs=lambda w: grid(w, "g", {"subsamples": 4}),
        setup=[f"{TAPT} run --config {{W}}/g.yaml --no-summary --shard {s}/2" for s in (0, 1)],
    ),
    Probe("9: a statistic's p of 7.5", f"{SUMMARIZE} --statistics s.py", {"s.py": STAT_P}),
    Probe(
        "9: a flow returning rows not in the pool",
        RUN,
        flow_file(('"row": test["row"]', '"row": test["row"] + 10**7')),
        configs=flow_cfg(),
    ),
    Probe(
        "9: a flow returning strings in correct",
        RUN,
        flow_file(('"correct": test["label"] == pick', '"correct": "yes"')),
        configs=flow_cfg(),
    ),
    *[
        Probe(
            f"10: generative YAML with {what}",
            f"{TAPT} tasks validate g/y.yaml --m 10 --n 10",
            {"d.jsonl": JSONL, "g/y.yaml": plain("my_y", GEN + rest)},
        )
        for what, rest in [
            (
                "group_select: 5",
                "filter_list:\n  - name: x\n    filter:\n      - function: regex\n"
                "        regex_pattern: '(yes|no)'\n        group_select: 5\n      - function: take_first\n",
            ),
            (
                "an invalid regex",
                "filter_list:\n  - name: x\n    filter:\n      - function: regex\n"
                "        regex_pattern: '([0-9'\n      - function: take_first\n",
            ),
            ("max_gen_toks: 0", "generation_kwargs:\n  max_gen_toks: 0\n"),
        ]
    ],
    Probe(
        "12: test-time RL's answers: free on a generative task",
        RUN,
        configs=cfg(
            {
                "tasks": ["arithmetic"],
                "method": "test-time-rl",
                "method_settings": {"test-time-rl": {"answers": "free"}},
            }
        ),
    ),
    *[
        Probe(f"13: a flow plug-in {what}", RUN, flow_file(edit), configs=flow_cfg(extra))
        for what, edit, extra in [
            ("named like a built-in", ('name="toy"', 'name="classifier"'), None),
            ("whose compute raises", ("docs = plan.docs()", "raise RuntimeError('boom')"), None),
            ("whose compute returns None", ("return record_of(", "return None and record_of("), None),
            ("whose check raises", ("check=lambda cfg: None", "check=lambda cfg: 1 / 0"), None),
            ("with a section that is no settings class", ('"toy": (ToySettings,', '"toy": (dict,'), None),
            ("with a section named grid", ('sections={"toy"', 'sections={"grid"'), None),
            ("with a section key seed", ("tilt: int = option(0,", "seed: int = option(0,"), None),
            ("given an unknown section", ("", ""), {"nosuch": {"x": 1}}),
            (
                "omitting the test condition",
                ("for cond in plan.grid.conditions", "for cond in ['base', 'extra']"),
                None,
            ),
        ]
    ],
    Probe(
        "14: a statistic reading a missing effect",
        f"{SUMMARIZE} --statistics s.py",
        {
            "s.py": "from harness.api import Statistic, register_statistic\nregister_statistic(Statistic("
            "'{e}_x', 'x', 'points', lambda e: e == 'bias_nonexistent', lambda t, c, s: 0.0, "
            "pooled=lambda e: True))\n"
        },
    ),
    Probe(
        "15: tasks show on a YAML whose doc_to_target is a list",
        f"{TAPT} tasks show --task my_t --include-path g --m 10 --n 10",
        {
            "d.jsonl": JSONL,
            "g/t.yaml": plain(
                "my_t",
                "output_type: multiple_choice\ndoc_to_text: '{{q}}'\n"
                "doc_to_choice: ['yes', 'no']\ndoc_to_target: [1, 2]\n",
            ),
        },
    ),
    Probe(
        "16: exposure --out naming a folder",
        f"{EXPOSURE} --base {{TINY}} --peft ad --out outdir",
        {"outdir/x.txt": ""},
        setup=ADAPTER,
    ),
    Probe(
        "16: exchangeability --out in a folder that is a file",
        f"{TAPT} contamination exchangeability --task ag_news --base {{TINY}} --data-dir {{DATA}} "
        "--out f/x.json",
        {"f": "a file"},
    ),
    Probe(
        "16: table1_compare on a folder that is not there",
        f"{{PY}} {ROOT}/benchmarks/table1_compare.py --results nowhere --model tiny",
    ),
    Probe(
        "17: a full disk under the run's --out",
        f"{TAPT} run --config {{W}}/g.yaml --no-summary",
        configs=lambda w: grid(w, "g"),
        damage=full_disk,
    ),
    *[
        Probe(
            f"19: a flow's own key, the flow {what}",
            RUN,
            files,
            configs=cfg({"flow": flow, "toy": {"tilt": 1}}),
        )
        for what, files, flow in [
            ("file missing", {}, "nope.py:FLOW"),
            ("attribute missing", {"f.py": toy_flow("p19a")}, "f.py:NOPE"),
            ("failing to import", {"f.py": "import no_such_module\n"}, "f.py:FLOW"),
            ("with a syntax error", {"f.py": "def (:\n"}, "f.py:FLOW"),
            ("of the wrong type", {"f.py": "FLOW = 3\n"}, "f.py:FLOW"),
        ]
    ],
    Probe(
        "20: --checkpoint a folder with no model",
        f"{EXPOSURE} --checkpoint empty --m 4 --n 6",
        {"empty/x.txt": ""},
    ),
    Probe(
        "20: train --overwrite into a folder it did not write",
        f"{TRAIN} --base {{TINY}} --out mine --overwrite",
        {"mine/notes.txt": "x"},
    ),
    Probe(
        "21: --config demo on a plain lm-eval task",
        f"{TAPT} run --config demo --tasks my_plain --include-path g --out o --no-summary",
        {
            "d.jsonl": JSONL,
            "g/p.yaml": plain(
                "my_plain",
                "output_type: multiple_choice\n"
                "doc_to_text: '{{q}}'\ndoc_to_choice: ['yes', 'no']\ndoc_to_target: '{{a}}'\n",
            ),
        },
    ),
]

# new inputs: the surfaces added since (the pilot, the study's draw, the leak's strength, test-time RL's
# premise) and the older ones a new user reaches first
NEW = [
    Probe(
        "pilot: --plan-seed the config's own seed",
        f"{TAPT} pilot --config {{W}}/cfg.yaml --plan plan.yaml --plan-seed 0",
        configs=cfg(),
    ),
    Probe(
        "pilot: --strengths 0",
        f"{PILOT} --strengths 0",
        configs=cfg({"conditions": ["base", "extra", "test", "leak"]}),
    ),
    Probe(
        "pilot: --strengths -2",
        f"{PILOT} --strengths -2",
        configs=cfg({"conditions": ["base", "extra", "test", "leak"]}),
    ),
    Probe("pilot: --strengths a", f"{PILOT} --strengths a", configs=cfg()),
    Probe("pilot: --plan over a file it did not write", PILOT, {"plan.yaml": "mine: 1\n"}, configs=cfg()),
    Probe(
        "pilot: --plan naming a folder",
        f"{TAPT} pilot --config {{W}}/cfg.yaml --plan pd --plan-seed 7",
        {"pd/x.txt": ""},
        configs=cfg(),
    ),
    Probe("pilot: --config missing", f"{TAPT} pilot --config nope.yaml --plan plan.yaml --plan-seed 7"),
    Probe(
        "pilot: --plan-seed -1",
        f"{TAPT} pilot --config {{W}}/cfg.yaml --plan plan.yaml --plan-seed -1",
        configs=cfg(),
    ),
    Probe("pilot: no --plan-seed", f"{TAPT} pilot --config {{W}}/cfg.yaml --plan plan.yaml", configs=cfg()),
    Probe("draw: --train-draw stratified", f"{RUN} --train-draw stratified", configs=cfg()),
    Probe("draw: train_draw Balanced in the config", RUN, configs=cfg({"train_draw": "Balanced"})),
    Probe("draw: m below the class count, balanced", RUN, configs=cfg({"m": 2})),
    Probe("draw: the config spelling train-draw", RUN, configs=cfg({"train-draw": "balanced"})),
    Probe("draw: n larger than the pool", RUN, configs=cfg({"n": 100000})),
    Probe("draw: m 0", RUN, configs=cfg({"m": 0})),
    Probe("draw: n -3", RUN, configs=cfg({"n": -3})),
    Probe("draw: seed 1.5", RUN, configs=cfg({"seed": 1.5})),
    Probe(
        "leak: leak_strength 0",
        RUN,
        configs=cfg({"conditions": ["base", "extra", "test", "leak"], "leak_strength": 0}),
    ),
    Probe(
        "leak: leak_strength 2.5",
        RUN,
        configs=cfg({"conditions": ["base", "extra", "test", "leak"], "leak_strength": 2.5}),
    ),
    Probe("leak: leak_strength without a leak condition", RUN, configs=cfg({"leak_strength": 4})),
    Probe("head: head_seed random", RUN, configs=cfg({"head_seed": "random"})),
    Probe(
        "ttrl: test-time-rl samples 0",
        RUN,
        configs=cfg({"method": "test-time-rl", "method_settings": {"test-time-rl": {"samples": 0}}}),
    ),
    Probe(
        "ttrl: test-time-rl settings under prompt-tapt",
        RUN,
        configs=cfg({"method_settings": {"prompt-tapt": {"samples": 4}}}),
    ),
    Probe(
        "ttrl: free_answer nonsense",
        RUN,
        configs=cfg(
            {"method": "test-time-rl", "method_settings": {"test-time-rl": {"free_answer": "middle"}}}
        ),
    ),
    Probe("run: config is a list", RUN, {"cfg.yaml": "- a\n- b\n"}),
    Probe("run: config YAML broken", RUN, {"cfg.yaml": "tasks: [ag_news\n"}),
    Probe("run: config missing", f"{TAPT} run --config nope.yaml"),
    Probe("run: an unknown key", RUN, configs=cfg({"subsample": 3})),
    Probe("run: tasks empty", RUN, configs=cfg({"tasks": []})),
    Probe("run: tasks a string", RUN, configs=cfg({"tasks": "ag_news"})),
    Probe("run: an unknown task", RUN, configs=cfg({"tasks": ["ag_newz"]})),
    Probe("run: subsamples 0", RUN, configs=cfg({"subsamples": 0})),
    Probe("run: conditions without extra", RUN, configs=cfg({"conditions": ["base", "test"]})),
    Probe("run: a condition twice", RUN, configs=cfg({"conditions": ["base", "extra", "test", "test"]})),
    Probe("run: an unknown condition", RUN, configs=cfg({"conditions": ["base", "extra", "tst"]})),
    Probe("run: --shard 2/2", f"{RUN} --shard 2/2", configs=cfg()),
    Probe("run: --shard a", f"{RUN} --shard a", configs=cfg()),
    Probe("run: --workers 0", f"{RUN} --workers 0", configs=cfg()),
    Probe("run: --out an existing file", RUN, {"o": "x"}, configs=cfg({"out": "o"})),
    Probe("run: an unknown method", RUN, configs=cfg({"method": "prompt-tap"})),
    Probe(
        "run: a method setting misspelled",
        RUN,
        configs=cfg({"method_settings": {"prompt-tapt": {"lr_": 0.1}}}),
    ),
    Probe(
        "run: a method's lr a string", RUN, configs=cfg({"method_settings": {"prompt-tapt": {"lr": "fast"}}})
    ),
    Probe("run: a method's lr negative", RUN, configs=cfg({"method_settings": {"prompt-tapt": {"lr": -1}}})),
    Probe(
        "run: settings of a method not run", RUN, configs=cfg({"method_settings": {"raw-text": {"lr": 0.1}}})
    ),
    Probe("run: data_dir missing", RUN, configs=cfg({"data_dir": "nodata"})),
    Probe("run: base missing", RUN, configs=cfg({"base": "nobase"})),
    Probe("run: base a file", RUN, {"b.bin": "x"}, configs=cfg({"base": "b.bin"})),
    Probe("run: quantize 8bit", RUN, configs=cfg({"quantize": "8bit"})),
    Probe("summarize: a folder that is not there", f"{TAPT} summarize nowhere"),
    Probe("summarize: an empty folder", f"{TAPT} summarize e", {"e/x.txt": ""}),
    Probe("summarize: a file", f"{TAPT} summarize f.txt", {"f.txt": "x"}),
    Probe("summarize: --statistics missing", f"{SUMMARIZE} --statistics nope.py"),
    Probe(
        "report: --out over a file it did not write",
        f"{TAPT} report {ROOT}/studies/methods_confirm --out r.html",
        {"r.html": "<html>mine</html>"},
    ),
    Probe(
        "analyze fit: a model the folder lacks",
        f"{TAPT} analyze fit {ROOT}/studies/methods_confirm --models nope",
    ),
    Probe("tasks new: a shipped task's name", f"{TAPT} tasks new ag_news --out t"),
    Probe("tasks new: a name with a slash", f"{TAPT} tasks new a/b --out t"),
    Probe("tasks show: an unknown task", f"{TAPT} tasks show --task nope"),
    Probe("tasks validate: YAML that does not parse", f"{TAPT} tasks validate t", {"t/x.yaml": "task: [a\n"}),
    Probe(
        "tasks validate: no doc_to_choice",
        f"{TAPT} tasks validate g/y.yaml --m 10 --n 10",
        {
            "d.jsonl": JSONL,
            "g/y.yaml": plain(
                "my_nc", "output_type: multiple_choice\ndoc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n"
            ),
        },
    ),
    Probe("train: an unknown task", f"{TAPT} train --task nope --split test --base {{TINY}} --out a"),
    Probe(
        "train: --split dev",
        f"{TAPT} train --task ag_news --split dev --base {{TINY}} --out a --data-dir {{DATA}}",
    ),
    Probe("train: --lr abc", f"{TRAIN} --base {{TINY}} --out a --lr abc"),
    Probe("train: --base a file", f"{TRAIN} --base b.bin --out a", {"b.bin": "x"}),
    Probe(
        "exposure: --task not the adapter's",
        f"{TAPT} contamination exposure --task trec --data-dir {{DATA}} --base {{{{TINY}}}} --peft ad",
        setup=ADAPTER,
    ),
    Probe(
        "exposure: --subsample not the adapter's",
        f"{EXPOSURE} --base {{TINY}} --peft ad --subsample 1",
        setup=ADAPTER,
    ),
    Probe("exposure: --peft missing", f"{EXPOSURE} --base {{TINY}} --peft nope"),
    Probe("exposure: neither --base nor --checkpoint", f"{EXPOSURE} --m 4 --n 6"),
    Probe(
        "lm_eval peft=: another task than the adapter's",
        f"{LM_EVAL.replace('tapt_ag_news', 'tapt_trec')} --model_args peft=ad",
        setup=ADAPTER,
    ),
    Probe(
        "lm_eval peft=: its tapt.json deleted",
        f"{LM_EVAL} --model_args peft=ad --limit 4",
        setup=ADAPTER,
        damage=lambda w: (w / "ad" / "tapt.json").unlink(),
    ),
    Probe("lm_eval peft=: a folder that is not there", f"{LM_EVAL} --model_args peft=nope"),
    Probe("merge: a source that is not there", f"{TAPT} merge nowhere --out m"),
    Probe(
        "merge: two configs' shards",
        f"{TAPT} merge a b --out m",
        configs=lambda w: (grid(w, "a"), grid(w, "b", {"seed": 3})),
        setup=[f"{TAPT} run --config {{W}}/{o}.yaml --no-summary" for o in ("a", "b")],
    ),
]

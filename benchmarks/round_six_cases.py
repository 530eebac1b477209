"""Round six's bad inputs (issue 110: each item, named as there) and new ones on the surfaces it names:
sibling and nested folders, symlinked folders, device and FIFO outputs, concurrent pilots, every `--out`,
records edited field by field. Each is one command and what it needs made first; `lost` checks what
the command must leave as it was (a device, a user's file)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from input_cases import RUN, cfg, flow_cfg, flow_file
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
    cut,
    edit_json,
    plain,
)

STUDIES = ROOT / "studies"
G2_EARLY = cfg(
    {"tasks": ["ag_news", "rotten_tomatoes"]}, out="g"
)  # two tasks: the hierarchical model's least
PILOT = f"{TAPT} pilot --config {{W}}/cfg.yaml --plan plan.yaml --plan-seed 5000"  # a seed far from the run's
XCH = f"{TAPT} contamination exchangeability --task ag_news --base {{TINY}} --data-dir {{DATA}}"
UNIT = "g/m4/n6/tiny/ag_news/units/0.json"
TDIR = "g/m4/n6/tiny/ag_news"
NOTES = "my notes: keep me\n"


def device(name: str = "dev"):
    """A character device in the probe's folder (the null device's numbers), made as root does."""

    def make(w: Path) -> None:
        os.mknod(w / name, 0o666 | stat.S_IFCHR, os.makedev(1, 3))

    return make


def fifo(name: str = "pipe"):
    return lambda w: os.mkfifo(w / name)


def still_device(name: str = "dev"):
    return lambda w: None if stat.S_ISCHR(os.lstat(w / name).st_mode) else f"{name} is no longer a device"


def still_fifo(name: str = "pipe"):
    return lambda w: None if stat.S_ISFIFO(os.lstat(w / name).st_mode) else f"{name} is no longer a FIFO"


def kept(name: str, text: str = NOTES):
    """The user's file is as they wrote it."""

    def check(w: Path) -> str | None:
        path = w / name
        ok = path.is_file() and path.read_bytes() == text.encode()  # a picture may now be there: bytes
        return None if ok else f"{name} was changed or removed"

    return check


def unit_edit(**changes):
    """Unit 0's record of g/ with fields changed (`a.b` reaches into a mapping)."""

    def damage(w: Path) -> None:
        path = w / UNIT
        record = json.loads(path.read_text())
        for key, value in changes.items():
            *outer, last = key.split(".")
            at = record
            for k in outer:  # a mapping the record lacks (an older one's `draw`) is made
                at = at.setdefault(k, {})
            at[last] = value
        path.write_text(json.dumps(record))

    return damage


def copy_study(name: str) -> list[str]:
    return [f"cp -r {STUDIES / name} s"]


def first_unit(w: Path, pattern: str = "s/**/units/0.json") -> Path:
    return sorted(w.glob(pattern))[0]


def edit_study_unit(**changes):
    def damage(w: Path) -> None:
        path = first_unit(w)
        record = json.loads(path.read_text())
        for key, value in changes.items():
            *outer, last = key.split(".")
            at = record
            for k in outer:  # a mapping the record lacks (an older one's `draw`) is made
                at = at.setdefault(k, {})
            at[last] = value
        path.write_text(json.dumps(record, indent=1))

    return damage


def equal_premise(w: Path) -> None:
    """Every unit's test-time RL record given a premise whose vote and greedy answer are both right 0.0%."""
    for path in w.glob("s/**/units/*.json"):
        record = json.loads(path.read_text())
        for cond in ("extra", "test", "leak"):
            record["training"][cond] |= {
                "premise_documents": 32,
                "vote_accuracy": 0.0,
                "greedy_accuracy": 0.0,
            }
        path.write_text(json.dumps(record, indent=1))


def two_lr(w: Path) -> None:
    from inputs_probe import grid

    grid(w, "a", {"out": "both/lr1", "subsamples": 1})
    grid(w, "b", {"out": "both/lr2", "subsamples": 1, "method_settings": {"prompt-tapt": {"lr": 0.02}}})


def tapt_json_n(n: int):
    return lambda w: edit_json(w / "ad" / "tapt.json", n=n)


SUM = f"{TAPT} summarize"
TRAIN_SIX = f"{TRAIN} --base {{TINY}}"
LR_RUNS = [f"{TAPT} run --config {{W}}/{x}.yaml --no-summary" for x in "ab"]


def double_row(w: Path) -> None:
    path = w / TDIR / "accuracies.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[1]]) + "\n")


def edit_manifest(w: Path) -> None:
    path = sorted(w.glob("s/**/manifest-*.json"))[0]
    record = json.loads(path.read_text())
    record["config"]["subsamples"] = 3
    path.write_text(json.dumps(record, indent=1))


MC = "output_type: multiple_choice\ndoc_to_text: '{{q}}'\ndoc_to_choice: ['yes', 'no']\n"
GEN_NO_TARGET = "output_type: generate_until\ndoc_to_text: '{{q}}'\n"
REGEX = "filter_list:\n  - name: x\n    filter:\n      - function: regex\n        regex_pattern: '{p}'\n"
REGEX += "      - function: take_first\n"
FLOW_READS = (
    'sections={"toy": (ToySettings, "the toy flow")},',
    'sections={"toy": (ToySettings, "the toy flow")}, reads=("nosuch",),',
)
REORDER = (
    "{PY} -c \"import pandas as pd; p = 'data/ag_news/data.parquet'; "
    'pd.read_parquet(p).sample(frac=1, random_state=1).to_parquet(p)"'
)
CHANGE_LOG = json.dumps({"canonical_logprobs": [1.0, 1.0, 1.0], "shuffled_logprobs": [[0.0, 0.0]] * 3})

ISSUE = [
    # 1: sibling runs pooled as one
    Probe("1: summarize a shipped pilot's two leak strengths", f"{SUM} {STUDIES}/table1_minilm_pilot"),
    Probe(
        "1: report a shipped pilot's two leak strengths",
        f"{TAPT} report {STUDIES}/table1_minilm_pilot --out r.html",
    ),
    Probe(
        "1: analyze a shipped pilot's two leak strengths",
        f"{TAPT} analyze fit {STUDIES}/table1_minilm_pilot --draws 50 --tune 50 --chains 1",
    ),
    Probe("1: summarize the control pilot's folder", f"{SUM} {STUDIES}/table1_minilm_control_pilot"),
    Probe(
        "1: two learning rates in sibling folders",
        f"{SUM} both",
        configs=two_lr,
        setup=[
            f"{TAPT} run --config {{W}}/a.yaml --no-summary",
            f"{TAPT} run --config {{W}}/b.yaml --no-summary",
        ],
    ),
    Probe(
        "1: a run copied twice",
        f"{SUM} both",
        configs=cfg(out="g"),
        setup=[*GRID, "mkdir both && cp -r g both/a && cp -r g both/b"],
    ),
    Probe(
        "1: merge of a run copied twice",
        f"{TAPT} merge both/a both/b --out m",
        configs=cfg(out="g"),
        setup=[*GRID, "mkdir both && cp -r g both/a && cp -r g both/b"],
    ),
    # 2, 3: the adapter's own draw
    Probe(
        "2: exchangeability --peft reads the adapter's draw",
        f"{XCH} --peft ad --permutations 20 --shards 2",
        setup=ADAPTER,
    ),
    Probe("2: exchangeability --peft with --n not the adapter's", f"{XCH} --peft ad --n 12", setup=ADAPTER),
    Probe(
        "3: tapt.json n edited: exposure --peft",
        f"{EXPOSURE} --base {{TINY}} --peft ad",
        setup=ADAPTER,
        damage=tapt_json_n(4),
    ),
    Probe(
        "3: tapt.json n edited: exchangeability --peft",
        f"{XCH} --peft ad",
        setup=ADAPTER,
        damage=tapt_json_n(4),
    ),
    Probe(
        "3: tapt.json n edited: lm_eval peft=",
        f"{LM_EVAL} --model_args pretrained={{TINY}},peft=ad --limit 2",
        setup=ADAPTER,
        damage=tapt_json_n(4),
    ),
    # 4: a device as --out
    Probe("4: exchangeability --out a device", f"{XCH} --out dev", configs=device(), lost=still_device()),
    Probe(
        "4: exposure --out a device",
        f"{EXPOSURE} --base {{TINY}} --out dev",
        configs=device(),
        lost=still_device(),
    ),
    Probe(
        "4: report --out a device",
        f"{TAPT} report g --out dev",
        configs=lambda w: (cfg(out="g")(w), device()(w)),
        setup=GRID,
        lost=still_device(),
    ),
    # 5, 6: a user's file beside or at the output
    Probe(
        "5: pilot --plan P.yaml beside the user's P.checking.yaml",
        f"{PILOT} --strengths 1 --subsamples 2",
        {"plan.checking.yaml": NOTES},
        configs=cfg({"conditions": ["base", "extra", "test", "leak"]}),
        lost=kept("plan.checking.yaml"),
    ),
    Probe(
        "6: analyze --out over a user's YAML notes",
        f"{TAPT} analyze fit g --out notes.yaml",
        {"notes.yaml": NOTES},
        configs=G2_EARLY,
        setup=GRID,
        lost=kept("notes.yaml"),
    ),
    # 7 to 15: silent
    Probe(
        "7: a pilot whose units' biases are all equal",
        f"{PILOT} --strengths 1 --subsamples 2",
        flow_file(("pick = ", "pick = 0 * ")),
        configs=flow_cfg({"conditions": ["base", "extra", "test", "leak"]}),
    ),
    Probe("8: summarize the shipped generative methods study", f"{SUM} {STUDIES}/methods_generative"),
    Probe("8: summarize the shipped ttrl_free study", f"{SUM} {STUDIES}/ttrl_free"),
    Probe(
        "9: a unit parquet cut to 500 bytes",
        f"{SUM} s",
        setup=copy_study("methods_confirm"),
        damage=lambda w: cut(first_unit(w).with_suffix(".parquet"), 500),
    ),
    Probe(
        "9: a unit's draw edited",
        f"{SUM} s",
        setup=copy_study("methods_confirm"),
        damage=edit_study_unit(**{"draw.train": "stratified"}),
    ),
    Probe(
        "9: a unit's settings edited, its hash kept",
        f"{SUM} s",
        setup=copy_study("methods_confirm"),
        damage=edit_study_unit(**{"settings.lr": 0.5}),
    ),
    Probe(
        "9: a unit's test accuracy edited in its record only",
        f"{SUM} s",
        setup=copy_study("methods_confirm"),
        damage=edit_study_unit(test=0.99),
    ),
    Probe(
        "10: merge two shards run on two versions of a data file",
        f"{TAPT} merge s0 s1 --out m",
        configs=lambda w: (cfg({"data_dir": "data"}, out="s0")(w), cfg({"data_dir": "data"}, out="s1")(w)),
        setup=[
            "cp -r {DATA} data",
            f"{TAPT} run --config {{W}}/s0.yaml --no-summary --shard 0/2",
            REORDER,
            f"{TAPT} run --config {{W}}/s1.yaml --no-summary --shard 1/2",
        ],
    ),
    Probe(
        "10: merge a shard whose unit record was deleted",
        f"{TAPT} merge g --out m",
        configs=cfg(out="g"),
        setup=GRID,
        damage=lambda w: (w / UNIT).unlink(),
    ),
    Probe(
        "11: leak_strength 1000000000",
        RUN,
        configs=cfg({"conditions": ["base", "extra", "test", "leak"], "leak_strength": 1000000000}),
    ),
    Probe(
        "12: head_seed per_condition in a zero-shot config", RUN, configs=cfg({"head_seed": "per_condition"})
    ),
    Probe("12: pilot --leak-strength 4", f"{PILOT} --leak-strength 4", configs=cfg()),
    Probe(
        "13: pvalue on shard differences with no spread",
        f"{TAPT} contamination pvalue log.json",
        {"log.json": CHANGE_LOG},
    ),
    Probe(
        "14: classes [calm, calm]",
        f"{TAPT} tasks validate tasks",
        configs=lambda w: (
            (w / "tasks").mkdir()
            or (w / "tasks" / "tapt_calm.yaml").write_text(
                (ROOT / "tasks_yaml" / "tapt_ag_news.yaml")
                .read_text()
                .replace("tapt_ag_news", "tapt_calm")
                .replace("include: _template_yaml", f"include: {ROOT}/tasks_yaml/_template_yaml")
            )
        ),
        damage=lambda w: (w / "tasks" / "tapt_calm.yaml").write_text(
            "\n".join(
                "classes: [calm, calm]" if ln.startswith("classes:") else ln
                for ln in (w / "tasks" / "tapt_calm.yaml").read_text().splitlines()
            )
        ),
    ),
    Probe(
        "15: show a regex no gold matches",
        f"{TAPT} tasks show --task my_re --include-path g --m 10 --n 10",
        {"d.jsonl": JSONL, "g/re.yaml": plain("my_re", GEN + REGEX.format(p="NEVER(\\\\d+)"))},
    ),
    Probe(
        "15: show an invalid regex",
        f"{TAPT} tasks show --task my_re --include-path g --m 10 --n 10",
        {"d.jsonl": JSONL, "g/re.yaml": plain("my_re", GEN + REGEX.format(p="(unclosed"))},
    ),
    Probe(
        "15: show a generative task defined twice",
        f"{TAPT} tasks show --task my_two --include-path a --include-path b --m 10 --n 10",
        {
            "a/d.jsonl": JSONL,
            "b/d.jsonl": JSONL,
            "a/t.yaml": plain("my_two", GEN),
            "b/t.yaml": plain("my_two", GEN),
        },
    ),
    Probe(
        "15: run a filter that reads no gold",
        RUN,
        {"d.jsonl": JSONL, "t/re.yaml": plain("my_re", GEN + REGEX.format(p="NEVER(\\\\d+)"))},
        configs=cfg({"tasks": ["my_re"], "include_path": ["t"], "m": 4, "n": 8}),
    ),
    Probe(
        "15: run group_select 5",
        RUN,
        {
            "d.jsonl": JSONL,
            "t/gs.yaml": plain(
                "my_gs",
                GEN
                + REGEX.format(p="(yes|no)").replace(
                    "regex_pattern", "group_select: 5\n        regex_pattern"
                ),
            ),
        },
        configs=cfg({"tasks": ["my_gs"], "include_path": ["t"], "m": 4, "n": 8}),
    ),
    # 16 to 20: tracebacks
    Probe("16: summarize into a pipe closed after two lines", f"{SUM} {STUDIES}/methods_study | head -2"),
    Probe(
        "17: a cut probabilities.parquet: summarize",
        f"{SUM} g",
        configs=cfg(out="g"),
        setup=GRID,
        damage=lambda w: cut(w / TDIR / "probabilities.parquet", 300),
    ),
    Probe(
        "17: a cut probabilities.parquet: report",
        f"{TAPT} report g --out r.html",
        configs=cfg(out="g"),
        setup=GRID,
        damage=lambda w: cut(w / TDIR / "probabilities.parquet", 300),
    ),
    Probe(
        "17: a cut probabilities.parquet: analyze",
        f"{TAPT} analyze fit g",
        configs=cfg(out="g"),
        setup=GRID,
        damage=lambda w: cut(w / TDIR / "probabilities.parquet", 300),
    ),
    Probe(
        "18: an adapter without its weights: exposure",
        f"{EXPOSURE} --base {{TINY}} --peft ad",
        setup=ADAPTER,
        damage=lambda w: (w / "ad" / "adapter_model.safetensors").unlink(),
    ),
    Probe(
        "18: an adapter without its weights: lm_eval peft=",
        f"{LM_EVAL} --model_args pretrained={{TINY}},peft=ad --limit 2",
        setup=ADAPTER,
        damage=lambda w: (w / "ad" / "adapter_model.safetensors").unlink(),
    ),
    Probe(
        "19: run an invalid regex",
        RUN,
        {"d.jsonl": JSONL, "t/re.yaml": plain("my_re", GEN + REGEX.format(p="(unclosed"))},
        configs=cfg({"tasks": ["my_re"], "include_path": ["t"], "m": 4, "n": 8}),
    ),
    Probe(
        "19: run max_gen_toks 0",
        RUN,
        {"d.jsonl": JSONL, "t/z.yaml": plain("my_z", GEN + "generation_kwargs:\n  max_gen_toks: 0\n")},
        configs=cfg({"tasks": ["my_z"], "include_path": ["t"], "m": 4, "n": 8}),
    ),
    Probe("20: a flow reading an unknown section", RUN, flow_file(FLOW_READS), configs=flow_cfg()),
    Probe(
        "20: analyze --hdi-prob 1.5", f"{TAPT} analyze fit g --hdi-prob 1.5", configs=cfg(out="g"), setup=GRID
    ),
    # unclear rows
    Probe(
        "u: an invalid manifest in a confirmed study",
        f"{SUM} s",
        setup=copy_study("methods_confirm"),
        damage=lambda w: cut(sorted(w.glob("s/**/manifest-*.json"))[0], 40),
    ),
    Probe(
        "u: an edited accuracies.csv",
        f"{SUM} g",
        configs=cfg(out="g"),
        setup=GRID,
        damage=lambda w: (w / TDIR / "accuracies.csv").write_text(
            (w / TDIR / "accuracies.csv").read_text().replace("0.1666", "0.2666")
        ),
    ),
    Probe(
        "u: a generative YAML without doc_to_target",
        f"{TAPT} tasks validate t",
        {"d.jsonl": JSONL, "t/n.yaml": plain("my_nt", GEN_NO_TARGET)},
    ),
    Probe(
        "u: an empty data file", f"{TAPT} tasks validate t", {"d.jsonl": "", "t/e.yaml": plain("my_e", GEN)}
    ),
    Probe(
        "u: a list doc_to_target",
        f"{TAPT} tasks validate t",
        {
            "d.jsonl": JSONL,
            "t/l.yaml": plain("my_l", MC.replace("doc_to_choice", "doc_to_target: ['yes']\ndoc_to_choice")),
        },
    ),
    Probe(
        "u: a folder named x.yaml",
        f"{TAPT} tasks validate x.yaml",
        {"x.yaml/t.yaml": plain("my_x", GEN), "d.jsonl": JSONL},
    ),
    Probe(
        "u: a user tapt_ag_news with other classes",
        f"{TAPT} tasks show --task ag_news --include-path mine --data-dir {{DATA}} --m 4 --n 6",
        configs=lambda w: (
            (w / "mine").mkdir()
            or (w / "mine" / "tapt_ag_news.yaml").write_text(
                (ROOT / "tasks_yaml" / "tapt_ag_news.yaml")
                .read_text()
                .replace("Sci/Tech", "Science")
                .replace("include: _template_yaml", f"include: {ROOT}/tasks_yaml/_template_yaml")
            )
        ),
    ),
    Probe(
        "u: a premise whose vote and greedy answer are both right 0.0%",
        f"{SUM} s",
        setup=copy_study("methods_generative"),
        damage=equal_premise,
    ),
    Probe("u: pilot --strengths -4 1", f"{PILOT} --strengths -4 1", configs=cfg()),
    Probe(
        "u: pvalue on empty lists",
        f"{TAPT} contamination pvalue log.json",
        {"log.json": '{"canonical_logprobs": [], "shuffled_logprobs": []}'},
    ),
    Probe(
        "u: pvalue on ragged lists",
        f"{TAPT} contamination pvalue log.json",
        {"log.json": '{"canonical_logprobs": [1, 2], "shuffled_logprobs": [[1, 2], [1]]}'},
    ),
    Probe("u: --checkpoint given a file", f"{EXPOSURE} --checkpoint f.bin", {"f.bin": "x"}),
    Probe("u: --out a folder for a JSON result", f"{XCH} --out outdir", {"outdir/keep.txt": "x"}),
    Probe("u: a file-size limit (ulimit -f)", f"ulimit -f 8 && {RUN}", configs=cfg()),
    Probe(
        "u: a flow file named beside the config, run from another folder",
        f"cd sub && {TAPT} run --config {{W}}/cfgs/c.yaml --no-summary",
        {"cfgs/f.py": flow_file(("x", "x"))["f.py"], "sub/x": ""},
        configs=lambda w: cfg({"flow": "f.py:FLOW", "out": "g"}, out="cfgs/c")(w),
    ),
]


def both(*makers):
    """Several config or file writers as one."""
    return lambda w: [make(w) for make in makers]


G = cfg(out="g")  # the tiny grid's config; GRID runs it into g/
FAST_FIT = "--draws 50 --tune 50 --chains 1"
PCA = f"{TAPT} simulate pca --ranks 2 --subsamples 3 --features 8 --m 20 --n 20"
COPIES = "mkdir both && cp -r g both/a && cp -r g both/b"
CALIBRATE = f"{TAPT} contamination calibrate --config {{W}}/cfg.yaml"
FIRST = "> first.log 2>&1 & sleep 5; "  # the first command in the background, its words kept apart
AFTER = "; r=$?; wait; exit $r"  # the second command's exit code, once the first has ended
# the first in the background until its lock is taken (a run holds its folder)
HELD = "> first.log 2>&1 & until ls cfg/m4/n6/tiny/.lock-* >/dev/null 2>&1; do sleep 0.2; done; "
G2 = cfg({"tasks": ["ag_news", "rotten_tomatoes"]}, out="g")  # two tasks: the hierarchical model's least


def unit_probe(field: str, value) -> Probe:
    return Probe(
        f"record edited: a unit's {field}",
        f"{SUM} g",
        configs=G,
        setup=GRID,
        damage=unit_edit(**{field: value}),
    )


def link(name: str, to: str):
    return lambda w: os.symlink(to, w / name)


def still_link(name: str, to: str):
    def check(w: Path) -> str | None:
        path = w / name
        ok = path.is_symlink() and os.readlink(path) == to
        return (
            None
            if ok and (not to.startswith("/dev") or stat.S_ISCHR(os.stat(to).st_mode))
            else f"{name} changed"
        )

    return check


MORE = [
    # a character device (the null device's numbers) as every output
    Probe("device: train --out", f"{TRAIN_SIX} --out dev", configs=device(), lost=still_device()),
    Probe("device: run's out", RUN, configs=both(cfg({"out": "dev"}), device()), lost=still_device()),
    Probe(
        "device: merge --out",
        f"{TAPT} merge g --out dev",
        configs=both(G, device()),
        setup=GRID,
        lost=still_device(),
    ),
    Probe(
        "device: pilot --plan",
        f"{TAPT} pilot --config {{W}}/cfg.yaml --plan dev --plan-seed 5000",
        configs=both(cfg(), device()),
        lost=still_device(),
    ),
    Probe(
        "device: pilot --plan-out",
        f"{PILOT} --plan-out dev",
        configs=both(cfg(), device()),
        lost=still_device(),
    ),
    Probe(
        "device: analyze fit --out",
        f"{TAPT} analyze fit g --out dev {FAST_FIT}",
        configs=both(G, device()),
        setup=GRID,
        lost=still_device(),
    ),
    Probe(
        "device: analyze fit --plots",
        f"{TAPT} analyze fit g --plots dev {FAST_FIT}",
        configs=both(G, device()),
        setup=GRID,
        lost=still_device(),
    ),
    Probe(
        "device: analyze meta --out",
        f"{TAPT} analyze meta g --m 4 --n 6 --out dev --slices 5",
        configs=both(G2, device()),
        setup=GRID,
        lost=still_device(),
    ),
    Probe("device: simulate pca --plot", f"{PCA} --plot dev", configs=device(), lost=still_device()),
    Probe(
        "device: tasks new --out", f"{TAPT} tasks new mine --out dev", configs=device(), lost=still_device()
    ),
    Probe(
        "device: calibrate --out",
        f"{CALIBRATE} --out dev",
        configs=both(cfg(), device()),
        lost=still_device(),
    ),
    # a FIFO as an output: refused at once, never opened (a writer would wait for a reader forever)
    Probe(
        "fifo: exposure --out", f"{EXPOSURE} --base {{TINY}} --out pipe", configs=fifo(), lost=still_fifo()
    ),
    Probe("fifo: exchangeability --out", f"{XCH} --out pipe", configs=fifo(), lost=still_fifo()),
    Probe(
        "fifo: report --out",
        f"{TAPT} report g --out pipe",
        configs=both(G, fifo()),
        setup=GRID,
        lost=still_fifo(),
    ),
    Probe(
        "fifo: analyze fit --out",
        f"{TAPT} analyze fit g --out pipe {FAST_FIT}",
        configs=both(G, fifo()),
        setup=GRID,
        lost=still_fifo(),
    ),
    Probe("fifo: simulate pca --plot", f"{PCA} --plot pipe", configs=fifo(), lost=still_fifo()),
    # symlinked outputs and folders
    Probe(
        "symlink: exposure --out a link to the null device",
        f"{EXPOSURE} --base {{TINY}} --out l.json",
        configs=link("l.json", "/dev/null"),
        lost=still_link("l.json", "/dev/null"),
    ),
    Probe(
        "symlink: report --out a link to the user's page",
        f"{TAPT} report g --out l.html",
        {"mine.html": NOTES},
        configs=both(G, link("l.html", "mine.html")),
        setup=GRID,
        lost=kept("mine.html"),
    ),
    Probe("symlink: summarize a linked run folder", f"{SUM} l", configs=both(G, link("l", "g")), setup=GRID),
    Probe(
        "symlink: a run and a link to it in one folder",
        f"{SUM} both",
        configs=G,
        setup=[*GRID, "mkdir both && cp -r g both/a && ln -s a both/b"],
    ),
    Probe(
        "symlink: merge a run with a link to it",
        f"{TAPT} merge g l --out m",
        configs=both(G, link("l", "g")),
        setup=GRID,
    ),
    Probe(
        "symlink: run's out a link to its finished run",
        f"{TAPT} run --config {{W}}/l.yaml --no-summary",
        configs=both(G, cfg({"out": "l"}, out="l"), link("l", "g")),
        setup=GRID,
    ),
    # sibling and nested folders
    Probe(
        "nested: a run copied inside another run's folder",
        f"{SUM} g",
        configs=G,
        setup=[*GRID, "cp -r g g2 && mv g2 g/inner"],
    ),
    Probe(
        "siblings: two cells of one run (n 6 and n 8)",
        f"{SUM} g",
        configs=both(G, cfg({"n": 8}, out="g8")),
        setup=[*GRID, f"{TAPT} run --config {{W}}/g8.yaml --no-summary --out g"],
    ),
    Probe(
        "siblings: two model tags of one base",
        f"{SUM} g",
        configs=both(G, cfg({"model_tag": "tiny2"}, out="t2")),
        setup=[*GRID, f"{TAPT} run --config {{W}}/t2.yaml --no-summary --out g"],
    ),
    Probe(
        "siblings: report two learning rates",
        f"{TAPT} report both --out r.html",
        configs=two_lr,
        setup=LR_RUNS,
    ),
    Probe(
        "siblings: analyze two learning rates",
        f"{TAPT} analyze fit both {FAST_FIT}",
        configs=two_lr,
        setup=LR_RUNS,
    ),
    Probe(
        "siblings: merge two learning rates",
        f"{TAPT} merge both/lr1 both/lr2 --out m",
        configs=two_lr,
        setup=LR_RUNS,
    ),
    Probe(
        "siblings: a run copied twice: report",
        f"{TAPT} report both --out r.html",
        configs=G,
        setup=[*GRID, COPIES],
    ),
    Probe(
        "siblings: a run copied twice: analyze",
        f"{TAPT} analyze fit both {FAST_FIT}",
        configs=G,
        setup=[*GRID, COPIES],
    ),
    # two commands at once on one folder
    Probe("concurrent: two runs of one config", f"{RUN} {FIRST}{RUN}{AFTER}", configs=cfg()),
    Probe(
        "concurrent: two pilots of one plan",
        f"{PILOT} --strengths 1 {FIRST}{PILOT} --strengths 1{AFTER}",
        configs=cfg({"conditions": ["base", "extra", "test", "leak"]}),
    ),
    Probe(
        "concurrent: merge into a folder while a run writes it",
        f"{RUN} {HELD}{TAPT} merge g --out cfg{AFTER}",
        configs=both(cfg(), G),
        setup=GRID,
    ),
    # every --out over a file or folder the user made
    Probe(
        "user's file: report --out",
        f"{TAPT} report g --out mine.html",
        {"mine.html": NOTES},
        configs=G,
        setup=GRID,
        lost=kept("mine.html"),
    ),
    Probe(
        "user's file: exposure --out",
        f"{EXPOSURE} --base {{TINY}} --out mine.json",
        {"mine.json": NOTES},
        lost=kept("mine.json"),
    ),
    Probe(
        "user's file: analyze meta --out",
        f"{TAPT} analyze meta g --m 4 --n 6 --slices 5 --out mine.json",
        {"mine.json": NOTES},
        configs=G2,
        setup=GRID,
        lost=kept("mine.json"),
    ),
    Probe(
        "user's file: simulate pca --plot",
        f"{PCA} --plot mine.png",
        {"mine.png": NOTES},
        lost=kept("mine.png"),
    ),
    Probe(
        "user's file: analyze --plots over a plot's name",
        f"{TAPT} analyze fit g --plots p {FAST_FIT}",
        {"p/eq11_average_difference.png": NOTES},
        configs=G2,
        setup=GRID,
        lost=kept("p/eq11_average_difference.png"),
    ),
    Probe(
        "user's file: merge --out a folder of theirs",
        f"{TAPT} merge g --out mine",
        {"mine/notes.txt": NOTES},
        configs=G,
        setup=GRID,
        lost=kept("mine/notes.txt"),
    ),
    Probe(
        "user's file: run's out a folder of theirs",
        RUN,
        {"mine/notes.txt": NOTES},
        configs=cfg({"out": "mine"}),
        lost=kept("mine/notes.txt"),
    ),
    Probe(
        "user's file: tasks new over their YAML",
        f"{TAPT} tasks new mine --out t",
        {"t/tapt_mine.yaml": NOTES},
        lost=kept("t/tapt_mine.yaml"),
    ),
    Probe(
        "user's file: train --out a file",
        f"{TRAIN_SIX} --out mine.txt",
        {"mine.txt": NOTES},
        lost=kept("mine.txt"),
    ),
    Probe(
        "user's file: calibrate --out a folder of theirs",
        f"{CALIBRATE} --out mine",
        {"mine/notes.txt": NOTES},
        configs=cfg(),
        lost=kept("mine/notes.txt"),
    ),
    # records edited, field by field
    unit_probe("extra", 0.99),
    unit_probe("test", 0.99),
    unit_probe("majority", 0.1),
    unit_probe("subsample", 5),
    unit_probe("settings_hash", "0" * 16),
    unit_probe("settings.m", 40),
    unit_probe("settings.seed", 3),
    unit_probe("num_classes", 7),
    unit_probe("chance", 0.9),
    unit_probe("draw.train", "stratified"),
    Probe(
        "record edited: a unit's json cut",
        f"{SUM} g",
        configs=G,
        setup=GRID,
        damage=lambda w: cut(w / UNIT, 40),
    ),
    Probe(
        "record edited: a unit's json a list",
        f"{SUM} g",
        configs=G,
        setup=GRID,
        damage=lambda w: (w / UNIT).write_text("[]"),
    ),
    Probe(
        "record edited: a unit's json renamed 0 to 7",
        f"{SUM} g",
        configs=G,
        setup=GRID,
        damage=lambda w: (w / UNIT).rename(w / TDIR / "units" / "7.json"),
    ),
    Probe(
        "record edited: accuracies.csv deleted",
        f"{SUM} g",
        configs=G,
        setup=GRID,
        damage=lambda w: (w / TDIR / "accuracies.csv").unlink(),
    ),
    Probe(
        "record edited: probabilities.parquet deleted",
        f"{SUM} g",
        configs=G,
        setup=GRID,
        damage=lambda w: (w / TDIR / "probabilities.parquet").unlink(),
    ),
    Probe(
        "record edited: an accuracies.csv row doubled", f"{SUM} g", configs=G, setup=GRID, damage=double_row
    ),
    Probe(
        "record edited: a shipped unit's commit",
        f"{SUM} s",
        setup=copy_study("methods_confirm"),
        damage=edit_study_unit(**{"code.commit": "0" * 40}),
    ),
    Probe(
        "record edited: a shipped manifest's plan",
        f"{SUM} s",
        setup=copy_study("methods_confirm"),
        damage=edit_manifest,
    ),
    # first steps
    Probe("first steps: summarize an empty folder", f"{SUM} empty", {"empty/.keep": ""}),
    Probe("first steps: summarize a file", f"{SUM} f.txt", {"f.txt": "x"}),
    Probe(
        "first steps: report --analysis not JSON",
        f"{TAPT} report g --analysis notes.txt --out r.html",
        {"notes.txt": NOTES},
        configs=G,
        setup=GRID,
    ),
    Probe(
        "first steps: pvalue on a log holding NaN",
        f"{TAPT} contamination pvalue log.json",
        {"log.json": '{"canonical_logprobs": [1, NaN, 2], "shuffled_logprobs": [[0], [0], [0]]}'},
    ),
    Probe(
        "first steps: exposure --out in a folder not there",
        f"{EXPOSURE} --base {{TINY}} --out no/such/e.json",
    ),
    Probe(
        "first steps: analyze meta --slices 0",
        f"{TAPT} analyze meta g --m 4 --n 6 --slices 0",
        configs=G2,
        setup=GRID,
    ),
    Probe(
        "first steps: summarize --json into a closed pipe",
        f"{SUM} {STUDIES}/methods_study --json | head -c 10",
    ),
    Probe("first steps: tasks list into a closed pipe", f"{TAPT} tasks list | head -1"),
]

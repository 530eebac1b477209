"""No wrong answer printed as a right one: a method that leaves the base changed stops the run, one that
adapted on nothing is counted and left out of the effects, names never become paths outside `out`,
the report escapes what it reads, and bad inputs end in one line before anything is written."""

import json
from pathlib import Path

import pytest
from helpers import tiny_grid_config

import harness
from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError, UserError
from harness.grid.configuration.run_checks import load_run

NOT_RESTORING = """
import torch
from pathlib import Path
from tapt.methods import Adapted, Method
from tapt.methods.prompt_tapt import METHOD as PROMPT

CALLS = Path(__file__).with_name("calls.txt")

def double_the_norms(x):
    with CALLS.open("a") as f:
        f.write(x.docs["row"].astype(str).str.cat(sep=",") + "\\n")
    with torch.no_grad():
        for name, p in x.model.named_parameters():
            if "norm" in name:
                p.mul_(2.0)
    return Adapted(x.model, {"learned_from": len(x.docs)}, restore=lambda: x.model)

METHOD = Method("norm-doubling", ("zero_shot",), PROMPT.settings, double_the_norms)
"""


def test_a_method_that_does_not_give_the_base_back_stops_the_run_before_the_next_condition(
    tmp_path, tiny_llama, data_dir
):
    (tmp_path / "mine.py").write_text(NOT_RESTORING)
    out = tmp_path / "out"
    cfg = load_run(
        tiny_grid_config(
            tmp_path, tiny_llama, data_dir, out, method=f"{tmp_path / 'mine.py'}:METHOD", exposure=False
        )
    )
    with pytest.raises(UserError) as err:
        harness.run(cfg)
    message = str(err.value)
    assert "method norm-doubling" in message and str(tmp_path / "mine.py") in message
    assert "did not give the base back after the extra condition" in message
    assert "changed: model.layers.0.input_layernorm.weight" in message
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 1  # test was never adapted nor scored
    assert not list(out.rglob("units/*.json"))


def test_tlm_that_selects_nothing_is_no_adaptation_in_the_summary_and_the_report(
    tmp_path, tiny_llama, data_dir, capsys
):
    out = tmp_path / "out"
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        out,
        subsamples=2,
        exposure=False,
        method="test-time-learning",
        method_settings={"test-time-learning": {"threshold": 1000.0}},
    )
    main(["run", "--config", str(config)])
    shown = capsys.readouterr().out
    unit = json.loads((out / "m4/n6/tiny+test-time-learning/ag_news/units/0.json").read_text())
    assert unit["not_adapted"] == {c: "learned from 0 documents" for c in ("extra", "test", "leak")}
    assert (
        "boost (extra-base) n/a pts [n/a], bias (test-extra) n/a pts [n/a], leak (leak-extra) n/a pts [n/a]"
        in shown
    )
    assert (
        "tiny+test-time-learning · ag_news: no adaptation in 2 of 2 units (extra 2, test 2, leak 2)" in shown
    )
    bias_row = next(line for line in shown.splitlines() if line.strip().startswith("ag_news "))
    assert bias_row.split()[1:4] == ["n/a", "n/a", "n/a"]  # boost, bias, its p: not measurements
    main(["report", str(out), "--out", str(tmp_path / "r.html")])
    page = (tmp_path / "r.html").read_text()
    assert "no adaptation in 2 of 2 units" in page and "<b>n/a</b> pts" in page


def test_train_with_nothing_to_learn_exits_with_one_line_and_writes_nothing(tmp_path, tiny_llama, data_dir):
    out = tmp_path / "adapter"
    with pytest.raises(SystemExit, match="test-time-learning learned from 0 documents of the 6 in test"):
        main(
            f"train --method test-time-learning --task rotten_tomatoes --m 2 --n 6 --base {tiny_llama} "
            f"--data-dir {data_dir} --out {out} --threshold 1000".split()
        )
    assert not list(tmp_path.glob("adapter*"))


@pytest.mark.parametrize(
    "extra, key",
    [
        ({"model_tag": "../../ESCAPED_TAG"}, "model_tag"),
        ({"method": "{file}:METHOD"}, "method"),
    ],
)
def test_a_name_that_would_become_a_path_outside_out_is_refused_and_nothing_is_written(
    extra, key, tmp_path, tiny_llama, data_dir
):
    (tmp_path / "escape.py").write_text(
        "from tapt.methods import Method\nfrom tapt.methods.prompt_tapt import METHOD as P\n"
        "METHOD = Method('../../../ESCAPED', ('zero_shot',), P.settings, P.adapt)\n"
    )
    work = tmp_path / "work"
    out = work / "out"
    values = {k: v.format(file=tmp_path / "escape.py") for k, v in extra.items()}
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, out, **values)
    with pytest.raises(SettingsError, match=f"key '{key}'.*(names a results folder|no paths)"):
        load_run(config)
    with pytest.raises(SystemExit):
        main(["run", "--config", str(config)])
    assert not work.exists() and not any("ESCAPED" in p.name for p in tmp_path.rglob("*"))


SCRIPT = "<script>alert(1)</script>"


def test_the_report_escapes_every_field_it_reads_from_every_file(tiny_grid, tmp_path):
    """A script planted in every text field of calibration.json and of an analysis file, and in a
    task's and a model's folder names, is shown as text, never run."""
    import shutil

    root = tmp_path / "planted"
    shutil.copytree(tiny_grid, root)
    tdir = next(root.rglob("accuracies.csv")).parent
    tdir.rename(tdir.with_name(f"{tdir.name}{SCRIPT.replace('/', '')}"))
    rate = {"flagged": SCRIPT, "models": 3, "rate": 0.5, "low": 0.1, "high": 0.9}
    calibration = {
        "rates": [
            {
                "method": SCRIPT,
                "mode": SCRIPT,
                "detector": SCRIPT,
                "sees": SCRIPT,
                "false_positive": rate,
                "power": rate,
            }
        ]
    }
    (root / "calibration.json").write_text(json.dumps(calibration))
    analysis = tmp_path / "analysis.json"
    fit = {
        "m": 4, "n": 6, "effect": SCRIPT, "beta_mean": 0.1, "beta_hdi": [0.0, 0.2], "rhat_max": 1.0,
        "divergences": SCRIPT, "beta_ess_bulk": 400.0, "hdi_prob": 0.95, "per_task": [],
        "average_difference": {"mean": 0.01, "hdi": [0.0, 0.02], "observed": 0.01},
    }  # fmt: skip
    analysis.write_text(json.dumps({"fits": [fit]}))
    page_path = tmp_path / "r.html"
    try:
        main(["report", str(root), "--analysis", str(analysis), "--out", str(page_path)])
    except SystemExit as err:  # a plot that cannot draw a planted field is a one-line error, not a page
        assert "a value of the wrong form" in str(err)
        main(["report", str(root), "--out", str(page_path)])
    page = page_path.read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the page's own table sorter, nothing else


def corrupt_unit(tiny_grid, tmp_path) -> Path:
    import shutil

    root = tmp_path / "corrupt"
    shutil.copytree(tiny_grid, root)
    unit = next(root.rglob("units/0.json"))
    unit.write_text(unit.read_text()[:50])
    return root


@pytest.mark.parametrize("command", ["summarize {root}", "report {root}", "merge {root} --out {tmp}/m"])
def test_a_corrupt_unit_record_is_named_with_its_fix(command, tiny_grid, tmp_path):
    root = corrupt_unit(tiny_grid, tmp_path)
    with pytest.raises(
        SystemExit, match="units/0.json: not a readable unit record .*delete it and its 0.parquet"
    ):
        main(command.format(root=root, tmp=tmp_path).split())


BROKEN_FILES = {
    "syntax.py": ("def broken(:\n", "failed as it loaded \\(line 1\\): SyntaxError"),
    "raises.py": ("raise RuntimeError('at import')\n", "failed as it loaded: RuntimeError: at import"),
    "needs.py": (
        "import a_package_not_installed\n",
        "failed as it loaded: ModuleNotFoundError: No module named 'a_package_not_installed'; fix that file",
    ),
    "dict_settings.py": (
        "from tapt.methods import Method\nfrom tapt.methods.prompt_tapt import METHOD as P\n"
        "METHOD = Method('dicty', ('zero_shot',), dict, P.adapt)\n",
        "its settings <class 'dict'> must be a dataclass subclassing",
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN_FILES))
def test_methods_show_of_a_broken_file_is_one_line(name, tmp_path):
    text, message = BROKEN_FILES[name]
    (tmp_path / name).write_text(text)
    with pytest.raises(SystemExit, match=message):
        main(["methods", "show", f"{tmp_path / name}:METHOD"])
    with pytest.raises(SystemExit, match="must name a module or file and an attribute"):
        main(["methods", "show", ":METHOD"])


RETURNS = """
import dataclasses
import math
import torch
from tapt.methods import Adapted, Method
from tapt.methods.prompt_tapt import METHOD as P

NOT_A_MODEL = Method("not-a-model", ("zero_shot",), P.settings, lambda x: Adapted("not a model"))
LINEAR = Method("linear", ("zero_shot",), P.settings, lambda x: Adapted(torch.nn.Linear(2, 2), {"steps": 1}))
NOT_JSON = Method("not-json", ("zero_shot",), P.settings, lambda x: Adapted(x.model, {"when": object()}))
NAN = Method("nan", ("zero_shot",), P.settings, lambda x: Adapted(x.model, {"loss": math.nan}))
LOTS = Method("lots", ("zero_shot",), P.settings, lambda x: Adapted(x.model, {"learned_from": "lots"}))
BACKWARDS = Method("backwards", ("zero_shot",), P.settings, lambda x: Adapted(x.model, {"steps": -3}))
WORDS = Method("words", ("zero_shot",), P.settings, lambda x: Adapted(x.model, {"how": "high"}))
WORDS = dataclasses.replace(WORDS, diagnostics={"how": "how"})
"""


@pytest.mark.parametrize(
    "attr, message",
    [
        ("NOT_A_MODEL", "returned Adapted\\(str\\), which is not a causal LM .* adapt must return"),
        ("LINEAR", "method linear .* returned Adapted\\(Linear\\), which is not a causal LM"),
        ("NOT_JSON", "record whose key 'when' is not strict JSON"),
        ("NAN", "method nan .* record whose key 'loss' is not strict JSON \\(Out of range float values"),
        ("LOTS", "method lots .* record whose 'learned_from' is 'lots'; it must be a count"),
        ("BACKWARDS", "method backwards .* record whose 'steps' is -3; it must be a count"),
        ("WORDS", "method words .* diagnostic 'how' is 'high'; the summary and the report average"),
    ],
)
def test_what_a_method_returns_is_checked_before_it_is_scored_or_written(
    attr, message, tmp_path, tiny_llama, data_dir
):
    stopped_by(RETURNS, attr, message, tmp_path, tiny_llama, data_dir)


def stopped_by(source: str, attr: str, message: str, tmp_path, tiny_llama, data_dir) -> None:
    """A grid of the method `attr` of a file holding `source` stops with `message`, writing no unit."""
    (tmp_path / "mine.py").write_text(source)
    out = tmp_path / "out"
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, out, method=f"{tmp_path / 'mine.py'}:{attr}", exposure=False
    )
    with pytest.raises(SystemExit, match=message):
        main(["run", "--config", str(config)])
    assert not list(out.rglob("units/*"))  # no stray parquet without its record


@pytest.mark.parametrize(
    "out, message",
    [("/proc/tapt-bench-x", "out cannot create a folder in /proc"), ("{file}/sub", "is a file")],
)
def test_an_out_that_cannot_be_written_is_refused_before_anything_runs(
    out, message, tmp_path, tiny_llama, data_dir
):
    (tmp_path / "file").write_text("")
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "o")
    for command in ("run", "contamination calibrate"):
        with pytest.raises(SystemExit, match=message):
            main([*command.split(), "--config", str(config), "--out", out.format(file=tmp_path / "file")])


def test_duplicate_methods_are_refused(tmp_path, tiny_llama, data_dir):
    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "o", methods=["self-training"] * 2)
    with pytest.raises(SettingsError, match="key 'methods' names self-training twice"):
        load_run(config)


@pytest.mark.parametrize("method", ["prompt-tapt", "self-training"])
def test_train_refuses_method_settings_naming_the_flags_that_hold_them(method, tmp_path, data_dir):
    """A method's settings are train's flags (one spelling); the grid's mapping is refused, not read."""
    with pytest.raises(
        SystemExit, match=f"train takes a method's settings as its flags .*--method {method} --help"
    ):
        main(
            f"train --task rotten_tomatoes --m 2 --n 6 --data-dir {data_dir} --out {tmp_path / 'a'} "
            f"--method {method}".split()
            + ["--method-settings", '{"lr": 1}']
        )
    assert not (tmp_path / "a").exists()


def test_a_method_whose_setting_shares_a_name_with_trains_own_flags_is_refused(tmp_path):
    """train reads a method's settings from its flags; one named as a flag of train's own (here `split`,
    as an integer) would be read from that flag, so the method is refused, naming the setting."""
    (tmp_path / "clash.py").write_text(
        "from dataclasses import dataclass\n"
        "from harness.core.plumbing.settings import Settings, option\n"
        "from tapt.methods import Method\n"
        "from tapt.methods.prompt_tapt import METHOD as P\n"
        "@dataclass(kw_only=True)\n"
        "class S(Settings):\n"
        "    split: int = option(2, 'how many parts')\n"
        "METHOD = Method('clash', ('zero_shot',), S, P.adapt)\n"
    )
    with pytest.raises(
        SystemExit, match=r"method clash: its setting\(s\) \['split'\] share a name with train"
    ):
        main(["train", "--method", f"{tmp_path / 'clash.py'}:METHOD", "--task", "ag_news", "--out", "x"])


LEFT_BEHIND = """
from tapt.methods import Adapted, Method
from tapt.methods.prompt_tapt import METHOD as P

def hooked(x):
    x.model.model.layers[0].register_forward_hook(lambda module, args, out: out)
    return Adapted(x.model, {"learned_from": len(x.docs)}, restore=lambda: x.model)

def padded(x):
    x.tokenizer.padding_side = "left" if x.tokenizer.padding_side == "right" else "right"
    return Adapted(x.model, {"learned_from": len(x.docs)}, restore=lambda: x.model)

def more_tokens(x):
    x.tokenizer.add_tokens(["brand-new-token"])
    return Adapted(x.model, {"learned_from": len(x.docs)}, restore=lambda: x.model)

def configured(x):
    x.model.config.tie_word_embeddings = not x.model.config.tie_word_embeddings
    return Adapted(x.model, {"learned_from": len(x.docs)}, restore=lambda: x.model)

HOOK = Method("hook", ("zero_shot",), P.settings, hooked)
PADDING = Method("padding", ("zero_shot",), P.settings, padded)
TOKENS = Method("tokens", ("zero_shot",), P.settings, more_tokens)
CONFIG = Method("config", ("zero_shot",), P.settings, configured)
"""


@pytest.mark.parametrize(
    "attr, message",
    [
        (
            "HOOK",
            "method hook .* did not give the base back after the extra condition .*added: hooks on model",
        ),
        ("PADDING", "method padding .* changed the tokenizer in the extra condition .*tokenizer padding"),
        ("TOKENS", "method tokens .* changed the tokenizer in the extra condition .*tokenizer size"),
        ("CONFIG", "method config .* after the extra condition .*changed: config tie_word_embeddings"),
    ],
)
def test_a_method_that_leaves_a_hook_a_tokenizer_or_a_config_changed_stops_the_run(
    attr, message, tmp_path, tiny_llama, data_dir
):
    stopped_by(LEFT_BEHIND, attr, message, tmp_path, tiny_llama, data_dir)

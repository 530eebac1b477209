"""Settings: one declaration per setting, the same clear error from a config key, a flag or lm-eval's
--metadata, and nothing written before the checks pass."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from contamination.exchangeability import t_statistic
from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError, UserError
from harness.grid.configuration import resolve
from harness.grid.configuration.config import GridConfig, load_config
from harness.grid.configuration.run_checks import load_run


def write_config(folder, **keys):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "grid.yaml"
    path.write_text(json.dumps({"base": "SmolLM2-135M-Instruct", "tasks": ["trec"], "m": 8, "n": 16, **keys}))
    return path


def test_a_key_of_the_wrong_type_is_named_with_the_file(tmp_path, data_dir):
    path = write_config(tmp_path, data_dir=str(data_dir), m="eight")
    with pytest.raises(SettingsError, match=r"grid.yaml: key 'm' must be an integer, got 'eight'"):
        load_config(path)


def test_a_single_task_name_is_one_task(tmp_path, data_dir):
    cfg = load_config(write_config(tmp_path, data_dir=str(data_dir), tasks="rotten_tomatoes"))
    assert cfg.slugs == ["rotten_tomatoes"]


def test_a_bad_choice_fails_before_the_log_and_the_manifest_are_written(tmp_path, data_dir):
    out = tmp_path / "out"
    manifest = out / "m8" / "n16" / "SmolLM2-135M-Instruct" / "manifest-shard0of1.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text('{"an": "earlier run"}')
    path = write_config(tmp_path, data_dir=str(data_dir), out=str(out), quantize="8bit")
    with pytest.raises(SystemExit, match=r"key 'quantize' must be one of '4bit', 'none', got '8bit'"):
        main(["run", "--config", str(path)])
    assert manifest.read_text() == '{"an": "earlier run"}'
    assert not (manifest.parent / "logs").exists()


@pytest.mark.parametrize("n", [0, -3])
def test_n_below_1_is_refused_everywhere(tmp_path, data_dir, n):
    with pytest.raises(SettingsError, match=f"key 'n' must be at least 1, got {n}"):
        load_config(write_config(tmp_path, data_dir=str(data_dir), n=n))
    with pytest.raises(SystemExit, match=f"--n must be at least 1, got {n}"):
        main(["tasks", "show", "--task", "trec", "--data-dir", str(data_dir), "--n", str(n)])
    from tasks_yaml.utils import load_docs

    kwargs = {"slug": "trec", "hub_id": "trec", "classes": list("abcdef"), "instruction": "x."}
    with pytest.raises(
        SettingsError,
        match=f"(?s)task tapt_trec: --metadata 'n' must be at least 1, got {n}.*lm_eval sets the "
        "subsample with --metadata",
    ):
        load_docs(**kwargs, data_dir=str(data_dir), n=n)


def test_lm_eval_hook_names_the_metadata_fix_when_the_pool_is_too_small(data_dir):
    from tasks_yaml.utils import load_docs

    kwargs = {"slug": "trec", "hub_id": "trec", "classes": list("abcdef"), "instruction": "x."}
    with pytest.raises(UserError, match=r"(?s)task tapt_trec: m \+ 2n = 100 \+ 2\*5000 .*--metadata"):
        load_docs(**kwargs, data_dir=str(data_dir), n=5000)


def test_contamination_pvalue_on_a_binary_file(tmp_path):
    (tmp_path / "log.json").write_bytes(bytes(range(256)))
    with pytest.raises(SystemExit, match="log.json \\(a test log\\): not valid JSON"):
        main(["contamination", "pvalue", str(tmp_path / "log.json")])


def test_input_paths_in_a_config_resolve_against_its_folder_and_out_against_the_cwd(
    tmp_path, data_dir, monkeypatch
):
    folder = tmp_path / "configs"
    path = write_config(
        folder, data_dir=os.path.relpath(data_dir, folder), include_path=["mine"], out="results"
    )
    (folder / "mine").mkdir()
    monkeypatch.chdir("/")
    cfg = load_config(path)
    assert cfg.sample.data_dir == str(data_dir.resolve()) and cfg.sample.include_path == [
        str(folder / "mine")
    ]
    assert cfg.grid.out == "results"  # where the run starts
    with pytest.raises(UserError, match=str(folder / "nowhere" / "trec")):
        load_config(write_config(folder, data_dir="nowhere"))


def test_a_flag_overrides_the_config_key_of_the_same_name(tmp_path, data_dir, monkeypatch, capsys):
    from helpers import no_units

    from harness.grid.configuration import plan

    seen, run_plan = {}, plan.run_plan
    monkeypatch.setattr(plan, "run_plan", lambda cfg: seen.setdefault("cfg", run_plan(cfg)))
    no_units(monkeypatch)
    own = {"prompt-tapt": {"epochs": 1, "lr": 0.01}}
    path = write_config(tmp_path, data_dir=str(data_dir), m=4, method_settings=own, out=str(tmp_path / "out"))
    given = '{"prompt-tapt": {"epochs": 2}}'  # a method's settings: key by key over the file's
    main(["run", "--config", str(path), "--m", "8", "--method-settings", given, "--no-summary"])
    cfg = seen["cfg"].config  # the planned cell's keys
    assert cfg.sample.m == 8 and cfg.grid.tasks == ["trec"] and cfg.form.quantize == "4bit"
    assert cfg.grid.method_settings == {"prompt-tapt": {"epochs": 2, "lr": 0.01}}
    with pytest.raises(SystemExit, match="--eval-batch-size must be at least 1, got 0"):
        main(["run", "--config", str(path), "--eval-batch-size", "0"])
    with pytest.raises(SystemExit):  # one spelling: method_settings
        main(["run", "--config", str(path), "--epochs", "2"])
    assert "unrecognized arguments: --epochs 2" in capsys.readouterr().err


def test_python_callers_get_the_same_checks():
    with pytest.raises(SettingsError, match="eval_batch_size must be at least 1, got 0"):
        GridConfig(eval_batch_size=0)
    from harness.grid.configuration import plan

    with pytest.raises(SettingsError, match="prompt-tapt: key 'epochs' must be a number, got '3'"):
        plan.run_plans(GridConfig(method_settings={"prompt-tapt": {"epochs": "3"}}))  # the run's checks, once
    cfg = GridConfig(method_settings={"prompt-tapt": {"epochs": 3}})
    epochs = resolve.method_settings(cfg).epochs
    assert epochs == 3.0 and isinstance(epochs, float)


def test_p_value_of_a_large_t_does_not_underflow():
    z = np.random.default_rng(0).normal(size=256)
    d = 0.75 + (z - z.mean()) / z.std()  # mean 0.75, std 1: t = 0.75 * sqrt(256) = 12
    t, p = t_statistic(d, [[0.0]] * 256)
    assert t == pytest.approx(12.0)
    assert p > 0 and p == pytest.approx(stats.t.sf(12.0, 255)) and p < 1e-25


def test_the_lm_eval_hook_prints_a_user_error_as_one_line_and_passes_every_other_error_on(
    monkeypatch, capsys
):
    import importlib
    import sys

    from harness.core.plumbing.errors import UserError

    passed_on = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, error, tb: passed_on.append(kind))
    importlib.reload(importlib.import_module("tasks_yaml.utils"))
    hook = sys.excepthook
    importlib.reload(importlib.import_module("tasks_yaml.utils"))
    assert sys.excepthook is hook  # a second import wraps nothing twice
    hook(UserError, UserError("task tapt_x: bad n"), None)
    assert capsys.readouterr().err == "lm_eval: error: task tapt_x: bad n\n" and passed_on == []
    hook(KeyError, KeyError("k"), None)
    assert passed_on == [KeyError]  # lm-eval's own errors keep their traceback


def test_every_commands_help_renders_its_percent_signs_and_defaults(capsys):
    """argparse %-formats help: a literal '%' (Min-K%++, 95% intervals) must not break --help."""
    from harness.cli.main import main, parser

    def commands(p, prefix=()):
        if not p.subcommands():
            yield prefix
        for name, child in p.subcommands().items():
            yield from commands(child, (*prefix, name))

    found = list(commands(parser()))
    assert ("contamination", "exposure") in found and ("report",) in found and ("simulate", "pca") in found
    for cmd in found:
        with pytest.raises(SystemExit) as done:
            main([*cmd, "--help"])
        assert done.value.code == 0, cmd
    shown = " ".join(capsys.readouterr().out.split())  # the formatter wraps lines
    assert "Min-K%++" in shown and "95% intervals" in shown and "(default: None) (default" not in shown


HELP_IN_A_FRESH_PROCESS = """
import contextlib, io, sys
from harness.cli.main import main, parser
def commands(p, prefix=()):
    if not p.subcommands():
        yield prefix
    for name, child in p.subcommands().items():
        yield from commands(child, (*prefix, name))
for cmd in commands(parser()):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main([*cmd, "--help"])
heavy = ("torch", "scipy", "transformers", "peft", "trl", "lm_eval", "datasets", "pymc")
print(" ".join(m for m in heavy if m in sys.modules))
"""


def test_no_commands_help_waits_for_the_training_libraries():
    """--help, and every error a settings check gives, parse the settings alone: the libraries that train,
    score and sample (seconds of imports) load where a command uses them."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", HELP_IN_A_FRESH_PROCESS], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ""  # the names of those imported


def test_no_command_prints_bitsandbytes_optional_kernel_hint(capsys):
    """bitsandbytes logs at import, on CPUs with AVX512-BF16, that a hub kernel is missing: silenced."""
    import logging

    from harness.cli.main import main

    main(["tasks", "path"])
    import bitsandbytes  # noqa: F401  (what PEFT imports in the commands that train or score)

    assert logging.getLogger("bitsandbytes.backends.cpu.ops").getEffectiveLevel() >= logging.ERROR
    assert "kernels-community" not in capsys.readouterr().err


@pytest.mark.slow
def test_the_lm_eval_command_prints_a_bad_metadata_setting_alone(data_dir):
    """lm_eval's CLI catches no task error: the hook prints ours as one message, no traceback."""
    import subprocess
    import sys

    from harness.tasks.spec import TASKS_DIR

    for metadata, message in (
        ({"data_dir": str(data_dir), "split": "dev"}, "--metadata 'split' must be one of"),
        ({"data_dir": str(data_dir), "n": "8"}, "--metadata n must be a whole number, got '8'"),
    ):
        argv = [*f"-m lm_eval --model dummy --tasks tapt_trec --include_path {TASKS_DIR}".split()]
        done = subprocess.run(
            [sys.executable, *argv, "--metadata", json.dumps(metadata)],
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert f"lm_eval: error: task tapt_trec: {message}" in done.stderr


def test_a_target_acceptance_of_1_or_more_is_refused_before_anything_is_fitted(tmp_path):
    from harness.cli.main import main

    with pytest.raises(SystemExit, match="--retry-target-accept must be below 1 .*got 1.0"):
        main(["analyze", str(tmp_path / "no_results"), "--retry-target-accept", "1"])
    from harness.stats.bayes.sampling import FitSettings

    with pytest.raises(SettingsError, match="target_accept must be below 1"):
        FitSettings(target_accept=1.2)


CUT_BY_CTRL_C = """
import harness.cli.main as cli
class Bar:  # as tqdm's bar cut mid-__init__: its __del__ fails when collected
    def __del__(self):
        raise AttributeError("'Bar' object has no attribute 'pos'")
def interrupted(argv):
    global kept
    kept = Bar()
    raise KeyboardInterrupt
cli._run = interrupted
cli.main(["run"])
"""


def test_ctrl_c_ends_in_its_one_line_even_where_an_object_it_cut_fails_at_exit():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", CUT_BY_CTRL_C], capture_output=True, text=True)
    assert done.returncode == 130
    assert done.stderr.strip().splitlines()[-1].startswith("tapt-bench: interrupted;"), done.stderr
    assert "Exception ignored" not in done.stderr


def test_the_bare_command_says_what_each_command_does(capsys):
    with pytest.raises(SystemExit) as done:
        main([])
    shown = capsys.readouterr().out
    assert done.value.code == 0 and "run an experiment grid" in shown and "print the lm_eval" in shown
    for command, action in (("methods", "show"), ("tasks", "validate"), ("contamination", "exposure")):
        with pytest.raises(SystemExit) as done:  # a command with actions, none named
            main([command])
        shown = capsys.readouterr()
        assert done.value.code == 0 and action in shown.out and "required" not in shown.err, command


def test_analyze_help_names_where_its_flags_are(capsys):
    """`analyze --help` lists only fit and meta: it says which command shows the flags."""
    from harness.cli.main import main

    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "tapt-bench analyze fit --help" in shown and "tapt-bench analyze meta --help" in shown


# the demo's hash changed twice, deliberately: when it took the study's recipe (it was 74353ae2ce351f80), and
# when train's draw became the study's, balanced (it was 95c6dfd567db133c)
@pytest.mark.parametrize(
    "name, settings_hash", [("demo", "b5e5ba0668e73f99"), ("study_control", "029d06971211a1cf")]
)
def test_the_shipped_configs_keep_the_settings_hash_their_results_were_made_with(
    name, settings_hash, data_dir
):
    from harness.grid.configuration.config import load_config

    assert resolve.settings_hash(load_config(name, {"data_dir": str(data_dir)})) == settings_hash


def test_the_default_methods_settings_written_at_the_top_level_read_as_its_section_with_a_note(
    data_dir, tmp_path
):
    import yaml

    from harness.grid.configuration.config import CONFIGS_DIR, load_config
    from harness.grid.configuration.study_layout import SettingsNote

    shipped = load_config("demo", {"data_dir": str(data_dir)})
    sectioned = yaml.safe_load((CONFIGS_DIR / "demo.yaml").read_text())
    own = sectioned.pop("method_settings")["prompt-tapt"]
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(sectioned | own))  # the older spelling: epochs, lr ... at the top level
    with pytest.warns(
        SettingsNote,
        match=r"old.yaml: \['batch_size', 'epochs', 'lr', 'max_length'\] are prompt-tapt's settings; write",
    ):
        old = load_config(path, {"data_dir": str(data_dir)})
    assert (resolve.settings_hash(old), resolve.tag(old), old.grid.method_settings) == (
        resolve.settings_hash(shipped),
        resolve.tag(shipped),
        shipped.grid.method_settings,
    )
    path.write_text(yaml.safe_dump(sectioned | {"lr": 0.1, "method_settings": {"prompt-tapt": own}}))
    with pytest.raises(
        SettingsError,
        match=r"\['lr'\] are written at the top level and under method_settings.prompt-tapt; keep one",
    ):
        load_config(path, {"data_dir": str(data_dir)})
    path.write_text(yaml.safe_dump(sectioned | {"method_settings": {"prompt-tapt": {"threshold": 3}}}))
    with pytest.raises(SettingsError, match=r"prompt-tapt: unknown key\(s\) \['threshold'\]"):
        load_run(path, {"data_dir": str(data_dir)})
    path.write_text(yaml.safe_dump(sectioned | {"method_settings": {"prompt-tapt": {"quantize": "4bit"}}}))
    with pytest.raises(
        SettingsError, match=r"\['quantize'\] set the base's form for every method; set them at the top level"
    ):
        load_run(path, {"data_dir": str(data_dir)})


def test_a_config_narrowed_to_some_of_its_methods_drops_the_settings_of_the_others(data_dir):
    from harness.grid.configuration.config import load_config

    keys = {"data_dir": str(data_dir)}
    whole = load_config("methods_study", keys)
    narrowed = load_config("methods_study", keys | {"methods": ["self-training"]})
    assert narrowed.grid.methods == ["self-training"]  # prompt TAPT's settings dropped, its own kept
    assert narrowed.grid.method_settings == {
        "self-training": {"epochs": 2, "batch_size": 4, "lr": 0.002, "completion_only": False}
    }
    hashes = {c.grid.method: resolve.settings_hash(c) for c in whole.per_method()}
    assert [resolve.settings_hash(c) for c in narrowed.per_method()] == [hashes["self-training"]]
    kept = load_config("methods_study", keys | {"methods": ["test-time-rl"]})
    assert kept.grid.method_settings == {}
    assert [resolve.settings_hash(c) for c in kept.per_method()] == [hashes["test-time-rl"]]
    with pytest.raises(
        SettingsError, match=r"names \['prompt-tapt', 'self-training'\], which this run does not use"
    ):
        flags = {"methods": ["test-time-rl"], "method_settings": whole.grid.method_settings}
        load_run("methods_study", keys | flags)


def test_narrowing_reads_method_names_as_method_settings_does_a_plug_in_named_by_its_file(
    tmp_path, tiny_llama, data_dir
):
    from helpers import tiny_grid_config

    from harness.grid.configuration.config import load_config

    plug_in = str(Path(__file__).resolve().parent.parent / "examples" / "norm_tuning.py") + ":METHOD"
    path = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        tmp_path / "out",
        methods=["prompt-tapt", plug_in],
        method_settings={"norm-tuning": {"steps": 2}},
    )
    assert load_config(path, {"methods": ["prompt-tapt"]}).grid.method_settings == {
        "prompt-tapt": {"lr": 0.01, "batch_size": 4}
    }
    kept = load_config(path, {"methods": [plug_in]})
    assert kept.grid.method_settings == {"norm-tuning": {"steps": 2}}


@pytest.mark.parametrize("key, value", [("model_tag", "other"), ("notes", "x"), ("subsamples", 3)])
def test_a_key_a_unit_never_records_is_refused_per_task(tmp_path, tiny_llama, data_dir, key, value):
    """model_tag names the model's one folder, notes and subsamples the run: a task cannot have its own.
    Accepted per task, each was ignored without a word."""
    from helpers import tiny_grid_config

    path = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "out", task_overrides={"ag_news": {key: value}}
    )
    with pytest.raises(SettingsError, match=rf"ag_news: \['{key}'\] cannot be set per task"):
        load_run(path)

"""The score-first stream: test cut into chunks, each scored by the method adapted on the chunks before it
and never on itself; the first chunk is the base's; the summary prints the online gain beside the bias.
Its carry mode trains one adapter on, chunk after chunk (TLM's online setting); restart runs the method
from the base on all chunks before."""

import json

import pandas as pd
import pytest
from helpers import tiny_grid_config

import harness
from harness.cli.main import main
from harness.core.plumbing.errors import SettingsError, UserError
from harness.grid.configuration.run_checks import load_run
from harness.grid.unit.stream import chunks

WATCHED = """
from pathlib import Path
from tapt.methods import Method
from tapt.methods.prompt_tapt import METHOD as PROMPT

CALLS = Path(__file__).with_name("calls.txt")

def lora_norm(model):
    return sum(float(p.detach().float().norm()) for n, p in model.named_parameters() if "lora_B" in n)

def watched(x):
    with CALLS.open("a") as f:  # its rows; online, carried on, and the adapter's size when it starts
        f.write(x.docs["row"].astype(str).str.cat(sep=",") + f";{x.online};{x.carried()};")
        f.write(f"{lora_norm(x.model) if x.carried() else 0.0}\\n")
    return PROMPT.adapt(x)

METHOD = Method("watched", ("zero_shot",), PROMPT.settings, watched, carries=True)
"""


def calls_of(tmp_path):
    return [line.split(";") for line in (tmp_path / "calls.txt").read_text().splitlines()]


def watched_run(tmp_path, tiny_llama, data_dir, **stream):
    """One unit of WATCHED with the stream `stream` configures: (its record, its probabilities, test's rows
    in order)."""
    (tmp_path / "mine.py").write_text(WATCHED)
    out = tmp_path / "out"
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        out,
        method=f"{tmp_path / 'mine.py'}:METHOD",
        conditions=["base", "extra", "test", "stream"],
        subsamples=1,
        exposure=False,
        **stream,
    )
    harness.run(config)
    (unit_file,) = out.rglob("units/0.json")
    probs = pd.read_parquet(unit_file.parent.parent / "probabilities.parquet")
    test_rows = [str(r) for r in probs[probs["condition"] == "test"]["row"]]
    return json.loads(unit_file.read_text()), probs, test_rows


def test_test_is_cut_in_order_into_near_equal_chunks():
    test = pd.DataFrame({"row": [9, 4, 7, 1, 3, 8, 2]})
    assert [list(c["row"]) for c in chunks(test, 3)] == [[9, 4, 7], [1, 3], [8, 2]]


def test_each_chunk_is_scored_before_the_method_adapts_on_it(tmp_path, tiny_llama, data_dir, capsys):
    unit, probs, test_rows = watched_run(
        tmp_path, tiny_llama, data_dir, stream_mode="restart", stream_chunks=3
    )
    calls = [c[0].split(",") for c in calls_of(tmp_path)]
    assert {c[1] for c in calls_of(tmp_path)} == {"False"}  # restart: every chunk's run from the base
    assert len(calls) == 4 and calls[1] == test_rows  # extra, test, then the stream's two adaptations
    assert calls[2] == test_rows[:2] and calls[3] == test_rows[:4]  # the chunks before, never its own
    assert unit["training"]["stream"]["chunks"] == [2, 2, 2]
    stream, base = (probs[probs["condition"] == c].set_index("row") for c in ("stream", "base"))
    first = [int(r) for r in test_rows[:2]]
    pd.testing.assert_series_equal(stream.loc[first, "probs"], base.loc[first, "probs"])  # the base's
    assert list(stream.index) == list(base.index)
    capsys.readouterr()
    main(["summarize", str(tmp_path / "out")])
    assert "online (stream-extra)" in capsys.readouterr().out


def test_carry_trains_one_adapter_on_from_chunk_to_chunk_each_chunk_once(tmp_path, tiny_llama, data_dir):
    unit, _, test_rows = watched_run(tmp_path, tiny_llama, data_dir, stream_chunk_size=2)
    calls = calls_of(tmp_path)
    assert [c[0].split(",") for c in calls[2:]] == [test_rows[:2], test_rows[2:4]]  # each chunk once
    assert [c[1:3] for c in calls] == [["False", "False"]] * 2 + [["True", "False"], ["True", "True"]]
    assert float(calls[3][3]) > 0  # chunk 2 starts from the adapter chunk 1 trained (B moved off zero)
    record = unit["training"]["stream"]
    assert record["chunks"] == [2, 2, 2] and record["carried"] and record["learned_from"] == 4
    shas = [unit["training"][c]["adapter_sha256"] for c in ("extra", "test")]  # which adapter scored it
    assert all(len(h) == 64 for h in shas) and shas[0] != shas[1]
    assert unit["stream"] != unit["base"] or record["per_chunk"][1]["steps"] > 0


def test_carry_refuses_a_method_that_cannot_carry_and_one_that_stacks_a_new_adapter(
    tmp_path, tiny_llama, data_dir
):
    (tmp_path / "mine.py").write_text(
        WATCHED
        + "import dataclasses\n"
        + "PLAIN = dataclasses.replace(METHOD, carries=False)\n"
        + "import copy\n"
        + "from tapt.methods import Adapted\n"
        + "def stacked(x):  # trains on, then returns another model than the one it was given\n"
        + "    done = PROMPT.adapt(x)\n"
        + "    return Adapted(copy.deepcopy(done.model), done.record) if x.carried() else done\n"
        + "STACKED = dataclasses.replace(METHOD, adapt=stacked)\n"
    )
    keys = dict(conditions=["base", "extra", "test", "stream"], stream_chunk_size=2, exposure=False)
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "o", method=f"{tmp_path / 'mine.py'}:PLAIN", **keys
    )
    with pytest.raises(SettingsError, match="stream_mode.*cannot carry an adapter.*set stream_mode: restart"):
        load_run(config)
    load_run(config, {"stream_mode": "restart"})  # the restart runs any method
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "o2", method=f"{tmp_path / 'mine.py'}:STACKED", **keys
    )
    with pytest.raises(UserError, match="returned a new model in the stream \\(chunk 2 of 3\\)"):
        harness.run(config)


def test_the_stream_needs_the_zero_shot_flow_and_no_more_chunks_than_documents(
    tmp_path, tiny_llama, data_dir
):
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "o", conditions=["base", "extra", "test", "stream"]
    )
    with pytest.raises(SettingsError, match="--stream-chunks is 7, more than a cell.s 6 test documents"):
        load_run(config, {"stream_chunks": 7, "stream_mode": "restart"})
    with pytest.raises(SettingsError, match="--stream-chunk-size is 6, and a cell has 6 test .* at most 5"):
        load_run(config, {"stream_chunk_size": 6})

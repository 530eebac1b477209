"""The score-first stream: test cut into chunks, each scored by the method adapted on the chunks before it
and never on itself; the first chunk is the base's; the summary prints the online gain beside the bias."""

import json

import pandas as pd
import pytest
from helpers import tiny_grid_config

from harness.cli.main import main
from harness.core.errors import SettingsError
from harness.grid.config import load_config
from harness.grid.run import run
from harness.grid.stream import chunks

WATCHED = """
from pathlib import Path
from tapt.methods import Method
from tapt.methods.prompt_tapt import METHOD as PROMPT

CALLS = Path(__file__).with_name("calls.txt")

def watched(x):
    with CALLS.open("a") as f:
        f.write(x.docs["row"].astype(str).str.cat(sep=",") + "\\n")
    return PROMPT.adapt(x)

METHOD = Method("watched", ("zero_shot",), PROMPT.settings, watched)
"""


def test_test_is_cut_in_order_into_near_equal_chunks():
    test = pd.DataFrame({"row": [9, 4, 7, 1, 3, 8, 2]})
    assert [list(c["row"]) for c in chunks(test, 3)] == [[9, 4, 7], [1, 3], [8, 2]]


def test_each_chunk_is_scored_before_the_method_adapts_on_it(tmp_path, tiny_llama, data_dir, capsys):
    (tmp_path / "mine.py").write_text(WATCHED)
    out = tmp_path / "out"
    config = tiny_grid_config(
        tmp_path,
        tiny_llama,
        data_dir,
        out,
        method=f"{tmp_path / 'mine.py'}:METHOD",
        conditions=["base", "extra", "test", "stream"],
        stream_chunks=3,
        subsamples=1,
        exposure=False,
    )
    run(load_config(config))
    calls = [line.split(",") for line in (tmp_path / "calls.txt").read_text().splitlines()]
    (unit_file,) = out.rglob("units/0.json")
    unit = json.loads(unit_file.read_text())
    probs = pd.read_parquet(unit_file.parent.parent / "probabilities.parquet")
    test_rows = [str(r) for r in probs[probs["condition"] == "test"]["row"]]
    assert len(calls) == 4 and calls[1] == test_rows  # extra, test, then the stream's two adaptations
    assert calls[2] == test_rows[:2] and calls[3] == test_rows[:4]  # the chunks before, never its own
    assert unit["training"]["stream"]["chunks"] == [2, 2, 2]
    stream, base = (probs[probs["condition"] == c].set_index("row") for c in ("stream", "base"))
    first = [int(r) for r in test_rows[:2]]
    pd.testing.assert_series_equal(stream.loc[first, "probs"], base.loc[first, "probs"])  # the base's
    assert list(stream.index) == list(base.index)
    capsys.readouterr()
    main(["summarize", str(out)])
    assert "online (stream-extra)" in capsys.readouterr().out


def test_the_stream_needs_the_zero_shot_flow_and_no_more_chunks_than_documents(
    tmp_path, tiny_llama, data_dir
):
    config = tiny_grid_config(
        tmp_path, tiny_llama, data_dir, tmp_path / "o", conditions=["base", "extra", "test", "stream"]
    )
    with pytest.raises(SettingsError, match="--stream-chunks is 7, more than a cell.s 6 test documents"):
        load_config(config, {"stream_chunks": 7})

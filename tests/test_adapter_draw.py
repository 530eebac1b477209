"""A check of a checkpoint reads the documents it was trained on: the adapter's tapt.json names its draw
(task, m, n, seed, subsample, train's draw), the exposure test reads that draw by default, and a flag that
contradicts it is refused in one line naming both values."""

import json

import pytest

from harness.cli.main import main

pytestmark = pytest.mark.xdist_group("adapter_draw")  # one test process trains the module's adapter once


@pytest.fixture(scope="module")
def adapter(tmp_path_factory, tiny_llama, data_dir):
    out = tmp_path_factory.mktemp("adapter") / "test_ag_news"
    main(
        [
            "train", "--task", "ag_news", "--split", "test", "--m", "4", "--n", "8",
            "--base", str(tiny_llama), "--data-dir", str(data_dir), "--out", str(out),
            "--quantize", "none", "--epochs", "1", "--batch-size", "4", "--lr", "0.01",
        ]
    )  # fmt: skip
    return out


def exposure(adapter, tiny_llama, data_dir, tmp_path, *flags) -> dict:
    out = tmp_path / f"exposure{len(list(tmp_path.glob('exposure*')))}.json"
    main(
        [
            "contamination", "exposure", "--task", "ag_news", "--peft", str(adapter),
            "--base", str(tiny_llama), "--data-dir", str(data_dir), "--codec-context", "0",
            "--out", str(out), "--json", *flags,
        ]
    )  # fmt: skip
    return json.loads(out.read_text())


def documents(result: dict) -> list:
    scored = result["documents"]["suspect"]  # every document's scores, with its split and pool row
    return sorted(zip(scored["split"], scored["row"]))


def test_the_exposure_test_reads_the_adapters_own_draw_without_its_flags(
    adapter, tiny_llama, data_dir, tmp_path
):
    record = json.loads((adapter / "tapt.json").read_text())
    assert (record["m"], record["n"], record["subsample"], record["train_draw"]) == (4, 8, 0, "balanced")
    own = exposure(adapter, tiny_llama, data_dir, tmp_path)  # as the README writes it: no --m, --n
    named = exposure(adapter, tiny_llama, data_dir, tmp_path, "--m", "4", "--n", "8")
    assert documents(own) == documents(named) and len(documents(own)) == 16
    assert own["text"] == named["text"]  # the same verdict: the same documents, the same scores
    trained_rows = set(record["rows"])
    assert {row for split, row in documents(own) if split == "test"} == trained_rows


def test_a_flag_that_contradicts_the_adapters_draw_is_refused_naming_both(
    adapter, tiny_llama, data_dir, tmp_path
):
    with pytest.raises(
        SystemExit, match=r"--n 12, the adapter's 8 \(.*tapt.json\): it was trained on another draw"
    ):
        exposure(adapter, tiny_llama, data_dir, tmp_path, "--n", "12")
    with pytest.raises(SystemExit, match=r"--subsample 1, the adapter's 0"):
        exposure(adapter, tiny_llama, data_dir, tmp_path, "--subsample", "1")
    assert not list(tmp_path.glob("exposure*.json"))  # refused before anything is computed or written


def test_an_adapter_without_its_record_is_said_to_read_the_draw_the_flags_name(adapter, tmp_path, capsys):
    import shutil

    from harness.tasks.adapters import trained_for

    bare = tmp_path / "bare"
    shutil.copytree(adapter, bare)
    (bare / "tapt.json").unlink()
    assert trained_for(bare, {"n": 8}, "tapt_ag_news", "ag_news") == {}
    said = capsys.readouterr().err
    assert f"note: {bare} has no tapt.json naming the documents it was trained on" in said and "n 8" in said


def test_an_adapter_whose_tapt_json_is_another_adapters_is_refused_by_the_checks(
    adapter, tiny_llama, data_dir, tmp_path
):
    import shutil

    copied = tmp_path / "copied"
    shutil.copytree(adapter, copied)
    record = json.loads((copied / "tapt.json").read_text())
    (copied / "tapt.json").write_text(json.dumps({**record, "adapter_sha256": "f" * 64}))  # another's
    said = rf"{copied}: its tapt.json records adapter_sha256 ffffffffffff…, but the adapter's own files hash "
    with pytest.raises(SystemExit, match=said + record["adapter_sha256"][:12]):
        exposure(copied, tiny_llama, data_dir, tmp_path)  # was: read the record's draw, scored, written
    assert not list(tmp_path.glob("exposure*.json"))


def test_exchangeability_reads_the_adapters_draw_and_an_edited_record_is_refused(
    adapter, tiny_llama, data_dir, tmp_path, capsys
):
    """`contamination exchangeability --peft` tested the default n 100 draw of an adapter trained at n 8;
    it reads the record's draw now, and a contradicting flag is refused. A record whose n was edited from
    8 to 6 names other documents than the rows it lists: every check refuses it (before, exposure read
    "no evidence" on the wrong 6)."""
    import shutil

    def exchangeability(ad, *flags):
        out = tmp_path / f"x{len(list(tmp_path.glob('x*')))}.json"
        main(
            [
                "contamination", "exchangeability", "--task", "ag_news", "--peft", str(ad),
                "--base", str(tiny_llama), "--data-dir", str(data_dir), "--shards", "2",
                "--permutations", "2", "--out", str(out), *flags,
            ]
        )  # fmt: skip
        return json.loads(out.read_text())

    own = exchangeability(adapter)
    assert (own["settings"]["n"], own["settings"]["m"]) == (8, 4)
    assert "test split of subsample 0 (m 4, n 8):" in capsys.readouterr().out  # said, not only recorded
    with pytest.raises(SystemExit, match=r"--n 100, the adapter's 8"):
        exchangeability(adapter, "--n", "100")
    edited = tmp_path / "edited"
    shutil.copytree(adapter, edited)
    record = json.loads((edited / "tapt.json").read_text())
    (edited / "tapt.json").write_text(json.dumps({**record, "n": 6}))
    said = r"its tapt.json names the draw .*n 6.*whose test split is 6 rows, not the 8 rows it lists"
    with pytest.raises(SystemExit, match=said):
        exposure(edited, tiny_llama, data_dir, tmp_path)
    with pytest.raises(SystemExit, match=said):
        exchangeability(edited)

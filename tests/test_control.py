"""The planted leak as a positive control: matched in steps, checked for absorption, then read in
accuracy; the three words the summary prints; an encoder's MLM head fitted before any condition starts."""

import json

import numpy as np
import pytest
from test_study_design import one_unit

from harness.stats.summary import control
from harness.stats.summary.verdict import key

BIAS_UNINFORMATIVE = key("bias", "uninformative")


def write_units(mdir, units):
    """Unit records of one task under a model folder, as the grid writes them (a record and its table)."""
    folder = mdir / "trec" / "units"
    folder.mkdir(parents=True)
    for k, unit in enumerate(units):
        (folder / f"{k}.json").write_text(json.dumps(unit | {"subsample": k}))
        (folder / f"{k}.parquet").write_bytes(b"")


def unit(steps=(8, 8, 8), shift=0.0, named=None, checked=True, docs=20, seed=0):
    rng = np.random.default_rng(seed)
    extra = rng.normal(-5, 1, docs)
    settings = {"conditions": ["base", "extra", "test", "leak"]} | ({"leak_steps": named} if named else {})
    record = {"settings": settings, "training": {}}
    gold = {"extra": extra.tolist(), "leak": (extra + shift + rng.normal(0, 0.1, docs)).tolist()}
    record["control"] = {
        "steps": dict(zip(("extra", "test", "leak"), steps)),
        "tokens_seen": {},
        "gold_log_probs": gold if checked else {},
    }
    if not checked:  # a unit from before the check: its training records alone
        record.pop("control")
        record["training"] = {f"pretrain_{c}": {"steps": s} for c, s in zip(("extra", "test", "leak"), steps)}
    return record


def config(leak=0.08, p=0.001):
    return {"leak_mean": leak, "leak_p_value": p, "bias_units": 8, "bias_mean": 0.0}


@pytest.mark.parametrize(
    "units, cfg, word",
    [
        ([unit(shift=1.0, seed=k) for k in range(8)], config(), control.SEEN),
        ([unit(shift=1.0, seed=k) for k in range(8)], config(leak=0.0, p=0.6), control.ABSORBED),
        ([unit(shift=0.0, seed=k) for k in range(8)], config(), control.NOT_ABSORBED),
        ([unit(steps=(8, 8, 26), shift=1.0, seed=k) for k in range(8)], config(), control.UNMATCHED),
        (
            [unit(steps=(8, 8, 26), shift=1.0, named="unmatched", seed=k) for k in range(8)],
            config(),
            control.SEEN,
        ),
        ([unit(steps=(8, 8, 26), checked=False) for _ in range(8)], config(), control.UNMATCHED),
        ([unit(checked=False) for _ in range(8)], config(), control.UNMEASURED),
        # two units: no test over units can reject; each unit's own test over its documents does
        ([unit(shift=1.0, seed=k) for k in range(2)], config(leak=0.0, p=0.6), control.ABSORBED),
        ([unit(shift=0.0, seed=k) for k in range(2)], config(), control.NOT_ABSORBED),
    ],
)
def test_the_control_reads_one_word_and_a_null_only_after_seen(tmp_path, units, cfg, word):
    write_units(tmp_path, units)
    found = control.control_of(cfg, tmp_path)
    assert found["control"]["word"] == word
    blind = found.get(BIAS_UNINFORMATIVE)
    if word in (control.NOT_ABSORBED, control.UNMATCHED):  # the bias cannot be read as an absence
        assert blind and f"`{word}`" in blind
    else:
        assert blind is None
    line = control.control_line(found["control"])
    assert line.startswith(f"planted control: {word}")
    if word == control.NOT_ABSORBED:
        assert "log p of the gold answer, leak" in line and "higher in" in line
    if word == control.UNMATCHED:
        assert "extra 8, test 8, leak 26" in line


def test_a_headless_encoder_starts_every_condition_from_its_fitted_head_and_the_bases_pooler(
    tmp_path, tiny_bert, data_dir
):
    """mlm_head fit: the head is fitted once on pool rows no unit draws, the encoder frozen; every TAPT'd
    checkpoint keeps the base's pooler (an MLM checkpoint saves none: the classifier would draw one)."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, BertModel

    from harness.core.plumbing.errors import SettingsError
    from harness.grid.unit.flows.classifier import unused_rows
    from harness.tasks.protocol import find_spec, subsample_docs
    from harness.tasks.subsample import SampleSettings
    from tapt.methods.raw_text import mlm_head
    from tapt.methods.raw_text.pretrain import TextSettings, pretrain

    headless = tmp_path / "headless"
    BertModel.from_pretrained(tiny_bert).save_pretrained(headless)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(headless)
    rec = one_unit(
        tmp_path, headless, data_dir, task="trec", m=12, n=20, subsamples=2, mlm_head="fit", mlm_head_rows=32
    )
    fitted = rec["training"]["mlm_head"]
    assert rec["settings"]["mlm_head"] == "fit" and rec["settings"]["mlm_head_rows"] == 32
    assert fitted["encoder_unchanged"] and fitted["pooler_from_base"] and fitted["steps"] == 8
    assert fitted["rows"] == 32 and all(n.startswith("cls.") for n in fitted["trained"])
    assert all(
        rec["training"][f"pretrain_{c}"]["started_from_fitted_head"] for c in ("extra", "test", "leak")
    )
    # the fit's rows: none drawn by either unit's splits
    sample = SampleSettings(m=12, n=20, data_dir=str(data_dir))
    spec = find_spec("trec")
    drawn = {int(r) for k in (0, 1) for d in subsample_docs(spec, sample, k).values() for r in d["row"]}
    assert len(fitted["pool_rows"]) == 32 and not drawn & set(fitted["pool_rows"])
    free = len(unused_rows(spec, sample, 5452, 2, 100_000))  # at most: all the free rows where fewer
    assert free < 5452 and not drawn & set(unused_rows(spec, sample, 5452, 2, 100_000))
    with pytest.raises(
        SettingsError, match=r"mlm_head is fit, and trec's pool leaves 13 rows .*\(at least 32"
    ):
        unused_rows(spec, sample, 20, 2, 500)  # a pool of 20 rows: under 32 free whatever is drawn
    folder = mlm_head.cache_root() / fitted["checkpoint"]
    assert (folder / mlm_head.RECORD_NAME).is_file()
    base_pooler = BertModel.from_pretrained(headless).pooler.dense.weight.detach()
    out = tmp_path / "tapt"
    texts = [("a question about numbers", "")] * 8
    pretrain(str(folder), texts, TextSettings(pretrain_epochs=1, pretrain_batch_size=8), 0, out)
    saved = load_file(out / "model.safetensors")
    assert np.allclose(saved["bert.pooler.dense.weight"].numpy(), base_pooler.numpy())


@pytest.mark.parametrize(
    "key, value", [("head_seed", "per_condition"), ("mlm_head", "fit"), ("clf_epochs", 2)]
)
def test_a_zero_shot_config_refuses_the_classifier_heads_settings(tmp_path, tiny_llama, data_dir, key, value):
    """The zero-shot flow trains no head: a head setting there was accepted, ignored and not recorded."""
    from helpers import tiny_grid_config

    from harness.core.plumbing.errors import SettingsError
    from harness.grid.configuration.run_checks import load_run

    config = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", **{key: value})
    with pytest.raises(SettingsError, match=f"key '{key}' sets the classifier's head; the zero_shot flow"):
        load_run(config)

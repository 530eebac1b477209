"""The settings hash of every shipped config is the one its results were recorded with.

`data/settings_hashes.json` holds, for every shipped config and for variants of the demo that switch on
each optional part (the exposure test, CoDeC, the stream, bf16, other methods, the classifier flow),
each cell's, method's and task's recorded settings and hash, as computed when the grid config still
inherited its sections. Run this file as a script to write it again after a deliberate change."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from harness.core.plumbing.settings import fingerprint
from harness.grid.configuration import resolve
from harness.grid.configuration.config import CONFIGS_DIR, GridConfig, read

HASHES = Path(__file__).parent / "data" / "settings_hashes.json"
STUDIES = Path(__file__).resolve().parents[1] / "studies"  # the shipped studies' records: methods_study*
VARIANTS = {
    "exposure": {"exposure": True},
    "codec": {"exposure": True, "codec_context": 1},
    "text_score": {"exposure": True, "text_score": "mink++"},
    "leak_stream": {"conditions": ["base", "extra", "test", "leak", "stream"], "stream_mode": "restart"},
    "stream_3": {
        "conditions": ["base", "extra", "test", "stream"],
        "stream_chunks": 3,
        "stream_mode": "restart",
    },
    "stream_carry": {"conditions": ["base", "extra", "test", "stream"], "stream_chunk_size": 2},
    "bf16": {"bf16": True},
    "methods": {
        "methods": ["prompt-tapt", "self-training", "test-time-rl", "test-time-learning"],
        "method_settings": {
            "self-training": {"lr": 0.001, "bf16": True, "completion_only": False},  # its first results
            "test-time-learning": {"lr": 0.0001},
        },
    },
    "classifier": {
        "flow": "classifier",
        "base": "bert-base-uncased",
        "accuracy": "acc",
        "prompt_format": "plain",
    },
    "classifier_extra": {
        "flow": "classifier",
        "accuracy": "acc",
        "prompt_format": "plain",
        "base": "bert-base-uncased",
        "clf_epochs": 2,
        "method_settings": {"raw-text": {"pretrain_lr": 1e-4}},
    },
}


def rows(name: str, raw: dict) -> dict:
    """Per cell and method: the recorded settings, their hash and the base's; per task override: its hash."""
    cfg = read(raw, name)
    out = {}
    for cell in cfg.run_configs():
        key = f"{resolve.tag(cell)} m{cell.sample.m} n{cell.sample.n}"
        out[key] = {
            "hash": resolve.settings_hash(cell),
            "base": fingerprint(resolve.base_settings(cell)),
            "settings": resolve.recorded(cell),
        }
        for slug in sorted(cell.grid.task_overrides):
            out[f"{key} {slug}"] = {"hash": resolve.settings_hash(resolve.for_task(cell, slug))}
    return out


def configs() -> dict[str, dict]:
    out = {path.stem: yaml.safe_load(path.read_text()) for path in sorted(CONFIGS_DIR.glob("*.yaml"))}
    demo = out["demo"]
    return out | {f"demo+{name}": with_change(demo, change) for name, change in VARIANTS.items()}


def with_change(config: dict, change: dict) -> dict:
    """A variant: `change` on top of the config, its method_settings method by method (prompt TAPT's
    dropped in the classifier flow, which does not run it)."""
    sections = config.get("method_settings", {}) | change.get("method_settings", {})
    if change.get("flow") == "classifier":
        sections.pop("prompt-tapt", None)
    return config | change | {"method_settings": sections}


@pytest.mark.parametrize("name", sorted(configs()))
def test_a_shipped_config_records_the_settings_and_hash_it_always_did(name):
    expected = json.loads(HASHES.read_text())[name]
    assert rows(name, configs()[name]) == expected


def test_every_shipped_config_is_in_the_recorded_hashes():
    assert sorted(json.loads(HASHES.read_text())) == sorted(configs())


# defaults changed after the shipped studies ran, which their config files pin (so their records keep
# their hash): CoDeC drew one context per 8 documents (its default is now one per document), and the
# stream restarted from the base each chunk (it now carries one adapter on). Test-time RL's units ran
# again in its default mode (among the choices), so no method's setting is pinned.
CHANGED_GRID = {"codec_block": 8, "stream_mode": "restart", "train_draw": "proportional"}
# the key that turns it on (train's draw: every run has one)
CHANGED_WHEN = {"codec_block": "codec_context", "stream_mode": "conditions", "train_draw": "always"}
CHANGED_METHOD = {"self-training": {"completion_only": False}}  # a method's default that changed since


def test_a_shipped_runs_manifest_rebuilds_the_config_that_made_it():
    """With the defaults that changed since pinned as the shipped config files pin them; without them a
    manifest that predates those keys no longer does, and that run is refused rather than mixed."""
    manifests = sorted(STUDIES.glob("methods_study*/m*/n*/*/manifest-shard*.json"))
    assert len(manifests) >= 3
    changed = 0
    for path in manifests:
        manifest = json.loads(path.read_text())
        config = manifest["config"]
        shipped = yaml.safe_load((CONFIGS_DIR / f"{path.relative_to(STUDIES).parts[0]}.yaml").read_text())
        on = {
            "codec_context": bool(config.get("codec_context")),
            "conditions": "stream" in config["conditions"],
            "always": True,
        }
        grid = {k: v for k, v in CHANGED_GRID.items() if on[CHANGED_WHEN[k]]}
        assert all(shipped[k] == v for k, v in grid.items())  # the shipped config file pins them too
        pinned = {m: ms for m, ms in CHANGED_METHOD.items() if m in config.get("method_settings", {})}
        for method, keys in pinned.items():
            assert keys.items() <= shipped["method_settings"][method].items()  # the config file pins them
            config = config | {
                "method_settings": {
                    **config["method_settings"],
                    method: {**config["method_settings"][method], **keys},
                }
            }
        assert resolve.settings_hash(read(config | grid, str(path))) == manifest["settings_hash"], path
        older = any(k not in config for k in grid)  # written before the key existed: its old default ran
        changed += older
        assert (resolve.settings_hash(read(config, str(path))) != manifest["settings_hash"]) == older, path
    # every shipped run predates train_draw (the balanced draw is the default since)
    assert changed == len(manifests)


def test_a_config_is_its_sections_side_by_side_each_key_read_on_its_section():
    cfg = GridConfig(m=4, quantize="none", exposure=True)
    assert (cfg.sample.m, cfg.form.quantize, cfg.grid.exposure) == (4, "none", True)
    assert (
        (cfg.sample.m, cfg.form.quantize) == (4, "none")
        and cfg.replace(m=5).sample.m == 5
        and cfg.sample.m == 4
    )
    with pytest.raises(AttributeError, match="read-only section: make a changed copy with replace"):
        cfg.sample.m = 3
    with pytest.raises(AttributeError, match="holds 'm' on its section: read .sample.m"):
        _ = cfg.m
    with pytest.raises(AttributeError, match="has no key 'learning_rate'"):
        _ = cfg.learning_rate


if __name__ == "__main__":  # write the recorded hashes again (a deliberate change of what is recorded)
    HASHES.write_text(json.dumps({n: rows(n, raw) for n, raw in configs().items()}, indent=1, sort_keys=True))
    sys.exit(0)

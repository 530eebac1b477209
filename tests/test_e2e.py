"""End-to-end runs on the embedded default models (the slow tier)."""

import pytest

from harness.core.engine import models
from tapt.adapter import AdapterArgs
from tapt.methods.raw_text.pretrain import TextArgs, pretrain_text
from tapt.methods.single import train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2_dir():
    return models.prepare(models.SMOLLM2)  # dequantised from the package's GGUF once per machine


def test_minilm_masked_lm_pretraining_lowers_its_loss(real_data_dir, tmp_path):
    rec = pretrain_text(
        TextArgs(
            task="ag_news",
            split="test",
            base=str(models.prepare(models.MINILM)),
            out=tmp_path / "mlm",
            data_dir=str(real_data_dir),
            n=32,
            m=8,
            pretrain_batch_size=16,
        )
    )
    assert rec["objective"] == "mlm" and rec["steps"] == 4
    assert rec["final_loss"] < rec["losses"][0]


def test_smollm2_qlora_adapter_on_test_prompts(real_data_dir, smollm2_dir, tmp_path):
    rec = train(
        AdapterArgs(
            task="ag_news",
            split="test",
            base=str(smollm2_dir),
            out=tmp_path / "ad",
            data_dir=str(real_data_dir),
            n=8,
            m=8,
            batch_size=4,
        )
    )
    assert rec["quantized_4bit"] and rec["steps"] == 2 and rec["sequences"] == 8
    assert 1.0 < rec["losses"][0] < 8.0  # a real pretrained LM, not a random one (ln 49152 = 10.8)
    assert (tmp_path / "ad" / "adapter_model.safetensors").is_file()

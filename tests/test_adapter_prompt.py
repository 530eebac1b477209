"""An adapter is scored through lm-eval on the prompts it was trained on: the hook reads the prompt format
from the record tapt-bench wrote beside it, and refuses --metadata that contradicts it."""

import json

import pytest

from harness.core.errors import UserError
from harness.tasks.protocol import SplitSettings, find_spec, subsample_docs
from tasks_yaml.utils import FACTS, load_docs


def chat_adapter(folder, base):
    from peft import LoraConfig

    LoraConfig(base_model_name_or_path=str(base), task_type="CAUSAL_LM").save_pretrained(folder)
    (folder / "tapt.json").write_text(json.dumps({"kind": "adapter", "prompt_format": "chat"}))
    return folder


def test_a_chat_adapter_is_scored_on_the_chat_prompts_the_grid_trains_and_scores(
    tmp_path, tiny_llama, data_dir
):
    spec = find_spec("ag_news")
    facts = {k: getattr(spec, k) for k in FACTS if hasattr(spec, k)}
    metadata = {"data_dir": str(data_dir), "m": 4, "n": 6}
    peft = chat_adapter(tmp_path / "adapter", tiny_llama)
    scored = load_docs(**facts, **metadata, peft=str(peft))["test"]["prompt"]
    grid = SplitSettings(task="ag_news", prompt_format="chat", chat_model=str(tiny_llama), **metadata)
    plain = SplitSettings(task="ag_news", **metadata)
    assert scored == list(subsample_docs(spec, grid, 0)["test"]["prompt"])
    assert scored != list(subsample_docs(spec, plain, 0)["test"]["prompt"])  # the hook's old default
    with pytest.raises(
        UserError, match="--metadata prompt_format 'plain', but the adapter .* was trained on 'chat'"
    ):
        load_docs(**facts, **metadata, prompt_format="plain", peft=str(peft))

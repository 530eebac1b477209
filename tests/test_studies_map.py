"""The map of studies/ (studies/README.md) is what its generator writes from the records now: every run
folder a row, its units, commit, confirmation and headline as the records give them."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def generator():
    spec = importlib.util.spec_from_file_location("studies_map", ROOT / "benchmarks" / "studies_map.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["studies_map"] = module  # its dataclass reads its module
    spec.loader.exec_module(module)
    return module


def test_the_studies_readme_is_the_map_the_records_give():
    made = generator()
    assert sorted(p.name for p in (ROOT / "studies").iterdir() if p.is_dir()) <= sorted(made.ASKS)
    assert (ROOT / "studies" / "README.md").read_text() == made.studies_map()  # else: --write it again
    row = next(line for line in made.studies_map().splitlines() if "table1_minilm_plan/m50" in line)
    assert "| 90 | confirmed | bias -0.47 [-1.03, +0.10] pts; uninformative;" in row

"""The map of studies/ (studies/README.md) is what its generator writes from the records now: every run
folder a row, its units, commit, confirmation and headline as the records give them."""

import importlib.util
import subprocess
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
    written = made.studies_map()  # every run summarized: made once
    assert (ROOT / "studies" / "README.md").read_text() == written  # else: --write it again
    row = next(line for line in written.splitlines() if "table1_minilm_plan/m50" in line)
    assert "| 90 | confirmed | bias -0.47 [-1.03, +0.10] pts; uninformative;" in row


def test_the_shipped_ttrl_premise_records_give_the_results_pages_table():
    """The premise pilot's shipped records (studies/ttrl_premise) give back, row for row, the table the
    measurements page prints: no sample of the 64 questions is read again from a model."""
    shipped = ROOT / "studies" / "ttrl_premise" / "answers.json"
    table = [r for r in premise_table(shipped).splitlines() if r.startswith("| ar")]
    page = (ROOT / "docs" / "measurements" / "methods_generative.md").read_text().splitlines()
    assert len(table) == 8 and all(row in page for row in table)
    closest = "| N 16, T 0.7, budget 64 | 25.0% | 37.5% | 15.2% | 12% | 22% | -12.5 [-20.3, -4.7] pts | 64 |"
    assert f"| arithmetic {closest}" in table


def premise_table(records: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ttrl_premise.py"), "--from-records", str(records)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout

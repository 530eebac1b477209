"""The methods study's records ship with the repository: its units and per-document scores (not its
adapters). The results page's answer per method (verdict, pooled bias, MDE, units, leak) is what `summarize`
computes from them, so a reader checks the claims without the compute."""

import re
from pathlib import Path

import pytest

from harness.grid.configuration import resolve
from harness.results import collect
from harness.stats.summary.summary import summarize

ROOT = Path(__file__).resolve().parent.parent
RESULTS_PAGE = ROOT / "docs" / "results.md"  # the shipped studies' tables (the README links it)
RECORDS = ROOT / "studies" / "methods_study"
# each shipped config by name, and the folder its records ship in
SHIPPED = {"methods_study": RECORDS, "methods_study_tlm": ROOT / "studies" / "methods_study_tlm"}
MODEL = "SmolLM2-135M-Instruct"


def readme_rows() -> dict[str, list[str]]:
    """The results page's methods table: its cells by method name."""
    text = RESULTS_PAGE.read_text()
    section = text.split("## The methods study", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] in ("prompt-tapt", "self-training", "test-time-rl", "TLM"):
            rows[cells[0]] = cells
    return rows


def number(cell: str) -> float:
    if cell.startswith("inf"):
        return float("inf")
    if cell == "n/a":  # an uninformative verdict gives no MDE
        return float("nan")
    return float(re.search(r"[-+]?\d+(\.\d+)?", cell).group())


@pytest.fixture(scope="module")
def pooled() -> dict[str, dict]:
    out = {}
    for records in SHIPPED.values():
        if not records.is_dir():
            pytest.fail(f"{records} is missing: the study's records ship with the repository")
        for config in summarize(collect(records), seed=0, target=0.05)["configs"]:
            name = config["model"].split("+", 1)[1] if "+" in config["model"] else "prompt-tapt"
            out["TLM" if name == "test-time-learning" else name] = config
    return out


def test_the_readme_answers_for_every_shipped_method_and_only_those(pooled):
    assert set(readme_rows()) == set(pooled)


def test_the_readmes_verdict_bias_mde_units_and_leak_are_the_shipped_records(pooled):
    for method, cells in readme_rows().items():
        got = pooled[method]
        _, verdict, bias, mde, units, leak = cells[:6]
        assert verdict == got["bias_verdict"], method
        assert number(bias) == pytest.approx(100 * got["bias_mean"], abs=0.051), method
        assert number(mde) == pytest.approx(100 * got["detectable_bias"], abs=0.051, rel=0, nan_ok=True), (
            method
        )
        assert int(number(units)) == got["bias_units"], method
        assert number(leak) == pytest.approx(100 * got["leak_mean"], abs=0.051), method


def test_the_records_are_small_and_hold_no_adapters():
    files = [p for records in SHIPPED.values() for p in records.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 20e6
    assert not [p for p in files if p.suffix in (".safetensors", ".bin", ".pt")]


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_shipped_units_carry_the_configs_settings_so_the_same_command_resumes_them(name):
    """Every shipped unit's settings hash is the one `run --config NAME` computes today for its method: a
    rerun into the folder adds units and recomputes none."""
    import json

    import yaml

    from harness.core.plumbing.settings import from_mapping
    from harness.grid.configuration.config import GridConfig, config_path

    records = SHIPPED[name]
    raw = yaml.safe_load(config_path(name).read_text())  # no data or model needed to read it
    cfg = from_mapping(GridConfig, raw | {"out": str(records)}, name)
    expected = {resolve.tag(c): resolve.settings_hash(c) for c in cfg.run_configs()}
    units = list(records.rglob("units/*.json"))
    assert units
    for path in units:
        tag = path.relative_to(records).parts[2]
        assert json.loads(path.read_text())["settings_hash"] == expected[tag], path


def test_the_readmes_counts_of_collapsed_models_are_the_records_and_the_report_shows_them(tmp_path):
    from harness.cli.main import main
    from harness.stats.summary.summary import one_class

    text = " ".join(RESULTS_PAGE.read_text().split())
    for name, model in (("Prompt TAPT:", MODEL), ("Test-time RL:", f"{MODEL}+test-time-rl")):
        bullet = text.split(f"**{name}", 1)[1].split("- **", 1)[0]
        extra, test = map(int, re.search(r"\(extra (\d+), test (\d+)\)", bullet).groups())
        shares = one_class(RECORDS / "m8" / "n32" / model)
        assert [extra, test] == [round((shares[c] * shares["units"]).sum()) for c in ("extra", "test")], name
    main(["report", str(RECORDS), "--out", str(tmp_path / "report.html")])
    page = (tmp_path / "report.html").read_text()
    section = page.split(f"model {MODEL}+test-time-rl</h2>", 1)[1].split("<h2", 1)[0]
    assert "<h3>Collapsed models</h3>" in section


CONFIRM = ROOT / "studies" / "methods_confirm"


def confirm_rows() -> dict[str, list[str]]:
    """The results page's confirmatory table: its cells by model folder (`prompt-tapt, lr 0.0002` is the
    folder SmolLM2-135M-Instruct@lr=0.0002)."""
    text = RESULTS_PAGE.read_text()
    section = text.split("### Confirmatory", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        method, _, lr = cells[0].partition(", lr ")
        if line.startswith("| ") and method in ("prompt-tapt", "self-training") and lr:
            tag = f"{MODEL}@lr={lr}" if method == "prompt-tapt" else f"{MODEL}+{method}"
            rows[tag] = cells
    return rows


def test_the_readmes_confirmatory_table_is_the_shipped_records():
    from harness.stats.summary.summary import of_folder

    configs = {c["model"]: c for c in of_folder(CONFIRM)["configs"]}
    rows = confirm_rows()
    assert set(rows) == set(configs)
    for tag, cells in rows.items():
        got = configs[tag]
        _, verdict, bias, units, leak, boost = cells[:6]
        assert verdict.startswith(got["bias_verdict"]), tag
        assert number(bias) == pytest.approx(100 * got["bias_mean"], abs=0.051), tag
        assert int(number(units)) == got["bias_units"], tag
        assert number(leak) == pytest.approx(100 * got["leak_mean"], abs=0.051), tag
        assert number(boost) == pytest.approx(100 * got["boost_mean"], abs=0.051), tag


GENERATIVE = ROOT / "studies" / "methods_generative"


def test_the_readmes_generative_table_is_the_shipped_records():
    """The results page's two rows on tapt_arithmetic: each verdict, bias, unit count, leak and boost is the
    summary of the shipped records, and both models read as confirmed."""
    from harness.stats.summary.confirmation import confirmation
    from harness.stats.summary.summary import of_folder

    configs = {c["model"]: c for c in of_folder(GENERATIVE)["configs"]}
    text = RESULTS_PAGE.read_text()
    section = text.split("### On a generative task", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    tags = {"prompt TAPT, lr 2e-3": MODEL, "test-time RL": f"{MODEL}+test-time-rl"}
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] in tags:
            rows[tags[cells[0]]] = cells
    assert set(rows) == set(configs) == set(tags.values())
    for tag, cells in rows.items():
        got = configs[tag]
        _, verdict, bias, units, leak, boost = cells[:6]
        assert verdict.startswith(got["bias_verdict"].split(" (")[0]) and verdict.endswith("confirmed"), tag
        assert number(bias) == pytest.approx(100 * got["bias_mean"], abs=0.051), tag
        assert int(number(units)) == got["bias_units"], tag
        assert number(leak) == pytest.approx(100 * got["leak_mean"], abs=0.051), tag
        assert number(boost) == pytest.approx(100 * got["boost_mean"], abs=0.051), tag
        assert confirmation(GENERATIVE / "m8" / "n32" / tag)["status"] == "confirmed", tag


TABLE1 = ROOT / "studies" / "table1_minilm"


def test_the_readmes_table1_rows_are_the_shipped_records():
    """The results page's replication row of each shipped cell (MiniLM): its units, boost, bias and planted
    leak, each mean and interval end, are the summary of the shipped records, read as confirmed; a
    cell on the results page is shipped, and a shipped cell is on the results page."""
    from harness.stats.summary.confirmation import confirmation
    from harness.stats.summary.summary import of_folder

    text = RESULTS_PAGE.read_text()
    section = text.split("### The study's Table 1 on real weights", 1)[1].split("\n### ", 1)[0]
    tables = {
        int(m): block
        for m, block in re.findall(r"^\| m (\d+) / n \1 \|(.*?)(?:\n\n|\Z)", section, re.M | re.S)
    }
    shipped = of_folder(TABLE1)["configs"]
    assert sorted(tables) == sorted(got["m"] for got in shipped) and 50 in tables
    for got in shipped:
        (line,) = [row for row in tables[got["m"]].splitlines() if row.startswith("| ours, MiniLM")]
        _, units, *effects, verdict = [c.strip() for c in line.strip().strip("|").split("|")]
        assert int(units) == got["bias_units"] == got["rows"] == {50: 120, 100: 80}[got["m"]]  # the plan's
        for name, cell in zip(("boost", "bias", "leak"), effects, strict=True):
            shown = [float(x) for x in re.findall(r"[-+]\d+\.\d+", cell)]
            wanted = [100 * got[f"{name}_{end}"] for end in ("mean", "low", "high")]
            assert shown == pytest.approx(wanted, abs=0.006), (got["m"], name)
        assert verdict == f"{got['bias_verdict']}, confirmed"
        folder = TABLE1 / f"m{got['m']}" / f"n{got['n']}" / "minilm"
        assert confirmation(folder)["status"] == "confirmed"


def test_the_readmes_test_time_rl_premise_is_the_shipped_records():
    """The results page's sentence on test-time RL's premise: the vote's agreement with the gold answer on
    test's questions and the base's greedy accuracy on them are the shipped records' numbers."""
    import json

    from harness.results import collect

    units = sorted(GENERATIVE.glob(f"m8/n32/{MODEL}+test-time-rl/*/units/*.json"))
    votes = [json.loads(p.read_text())["training"]["test"]["label_accuracy"] for p in units]
    df = collect(GENERATIVE)
    base = df[df["model"] == f"{MODEL}+test-time-rl"]["base"].mean()
    text = " ".join(RESULTS_PAGE.read_text().split())
    pattern = r"its vote agreed with the gold answer on ([\d.]+)% of test's questions, while the base's "
    said = re.search(pattern + r"greedy answer was right on ([\d.]+)%", text)
    assert len(units) == 12 and said
    assert float(said.group(1)) == pytest.approx(100 * sum(votes) / len(votes), abs=0.051)
    assert float(said.group(2)) == pytest.approx(100 * base, abs=0.051)


def test_the_readmes_table1_its_way_row_is_the_shipped_plan():
    """The results page's row of the study's Table 1 run its way: units, boost, bias and leak (each mean and
    interval end) are the summary of the shipped plan, read as confirmed, with the study's draw."""
    import json

    from harness.stats.summary.confirmation import confirmation
    from harness.stats.summary.summary import of_folder

    plan = ROOT / "studies" / "table1_minilm_plan"
    text = RESULTS_PAGE.read_text()
    section = text.split("### The study's Table 1, its way", 1)[1].split("\n### ", 1)[0]
    (line,) = [row for row in section.splitlines() if row.startswith("| ours, MiniLM, the study's draw")]
    _, units, *effects, verdict = [c.strip() for c in line.strip().strip("|").split("|")]
    (got,) = of_folder(plan)["configs"]
    assert int(units) == got["bias_units"] == 90  # the plan's 15 tasks x 6
    for name, cell in zip(("boost", "bias", "leak"), effects, strict=True):
        shown = [float(x) for x in re.findall(r"[-+]\d+\.\d+", cell)]
        assert shown == pytest.approx(
            [100 * got[f"{name}_{end}"] for end in ("mean", "low", "high")], abs=0.006
        )
    assert verdict == f"{got['bias_verdict']}, confirmed"
    assert confirmation(plan / "m50" / "n50" / "minilm")["status"] == "confirmed"
    draws = {json.loads(p.read_text())["draw"]["train"] for p in plan.rglob("units/*.json")}
    assert draws == {"balanced"}

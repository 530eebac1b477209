"""`tapt-bench report`: one self-contained HTML page, opened in a real browser (headless Chromium)."""

import os
import re
import shutil
import subprocess

import pytest

from harness.cli.main import main


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        message = "headless Chromium not found (Debian: apt-get install chromium); .ci/run installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def rendered(page) -> tuple[str, str]:
    """The DOM after the page's scripts ran, and what the browser logged (console messages included)."""
    run = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, run.stderr


def test_the_report_of_a_run_opens_in_a_browser_with_its_tables_and_figures(tiny_grid, tmp_path, capsys):
    page = tmp_path / "report.html"
    main(["report", str(tiny_grid), "--out", str(page)])
    assert f"report: {page}" in capsys.readouterr().out
    dom, log = rendered(page)
    assert "CONSOLE" not in log  # no script error, no console message
    assert "<h2>m=4 n=6 model tiny</h2>" in dom and "settings hash <code>" in dom  # provenance
    summary = re.search(r"<caption>Per task, in accuracy points.*?</table>", dom, re.S).group(0)
    assert summary.count("<tr>") == 2 and ">ag_news<" in summary  # the header and the task's row
    headers = re.findall(r"<th>([^<]*)</th>", summary)
    assert headers == [
        "task",
        *("boost", "low (boost)", "high (boost)"),
        *("bias", "low", "high", "p", "p_BH", "MDE"),
        *("leak", "low (leak)", "high (leak)", "p (leak)", "p_BH (leak)"),
    ]
    assert "<h3>Changed predictions</h3>" in dom and "<h3>Exposure test</h3>" in dom
    figures = re.findall(r'<img alt="[^"]+" src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}">', dom)
    assert len(figures) == 1 and dom.count("<figcaption>") == 1  # every figure inline, with its caption
    assert "http://" not in dom.replace("http://www.w3.org", "") and "https://" not in dom  # no network


def test_the_bayesian_section_where_analyze_has_run(tiny_grid, tmp_path):
    from harness.stats.presentation import report

    record = {
        "m": 4,
        "n": 6,
        "effect": "bias",
        "hdi_prob": 0.89,
        "beta_mean": 0.1,
        "beta_hdi": [-0.2, 0.4],
        "rhat_max": 1.001,
        "divergences": 0,
        "beta_ess_bulk": 900.0,
        "average_difference": {"mean": 0.01, "hdi": [-0.02, 0.04], "observed": 0.012},
        "per_task": [{"task": "ag_news", "mean": 0.05, "hdi": [0.01, 0.09], "observed": 0.06}],
    }
    page = tmp_path / "r.html"
    page.write_text(report.build(tiny_grid, {"fits": [record]}))
    dom, log = rendered(page)
    assert "CONSOLE" not in log and "<h2>Hierarchical Bayesian analysis</h2>" in dom
    assert "tasks whose eq.12 89% HDI excludes 0 (1 of 1):" in dom and dom.count("<figcaption>") == 3


def test_a_folder_without_results_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(SystemExit, match="no accuracies.csv found"):
        main(["report", str(tmp_path), "--out", str(tmp_path / "r.html")])
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"foo": 1}', "expected an object with a non-empty list `fits`"),
        ("[]", "a JSON object was expected, got list"),
        ('{"fits": [{"m": 2}]}', "fits\\[0\\] lacks \\['n', 'effect', "),
        ("{not json", "not valid JSON .*analyze RESULTS --out FILE"),
    ],
)
def test_an_analysis_file_of_the_wrong_shape_is_refused_before_the_page_is_written(
    tiny_grid, tmp_path, content, message
):
    (tmp_path / "fits.json").write_text(content)
    page = tmp_path / "r.html"
    with pytest.raises(SystemExit, match=f"--analysis {tmp_path / 'fits.json'}: .*{message}"):
        main(["report", str(tiny_grid), "--analysis", str(tmp_path / "fits.json"), "--out", str(page)])
    assert not page.exists()


def test_the_report_heads_each_model_with_its_pooled_bias_test(tmp_path):
    """Six subsamples of one task, each a gain of 5-15 points: the page's head line gives the pooled
    bias with its two-sided p-value (2^-5 for six gains of one sign) and MDE, as the summary does."""
    import pandas as pd

    folder = tmp_path / "m10" / "n20" / "toy" / "a"
    folder.mkdir(parents=True)
    gains = [0.10, 0.15, 0.05, 0.10, 0.10, 0.05]
    columns = ["base", "extra", "test", "majority", "num_classes", "majority_all"]
    pd.DataFrame([[0.5, 0.5, 0.5 + g, 0.3, 2, 0.5] for g in gains], columns=columns).to_csv(
        folder / "accuracies.csv", index=False
    )
    main(["report", str(tmp_path), "--out", str(tmp_path / "report.html")])
    head = re.search(
        r"pooled over the 6 units of every task: bias \+9\.17 pts \[\+[\d.]+, \+[\d.]+\] \(95%, two-sided\), "
        r"p two-sided (0\.\d+), BH over 1 0\.\d+, MDE (\d+\.\d\d) pts: inflated",
        (tmp_path / "report.html").read_text(),
    )
    assert head and float(head.group(1)) < 0.05 and 0 < float(head.group(2)) < 9.17


def test_an_effect_added_in_conditions_alone_shows_in_the_summary_the_report_and_the_plots(
    tmp_path, tiny_llama, data_dir, capsys, monkeypatch
):
    """An effect is one line of core/design/conditions.py: `gain`, test against base, added there alone
    (as a contributor would), is read by the summary, the report's dose table and the dose plot."""
    from helpers import tiny_grid_config

    from harness.core.design import conditions
    from harness.stats.bayes import plots

    doses = {"doses": {"prompt-tapt": {"lr": [0.01, 0.02]}}, "subsamples": 1, "exposure": False}
    path = tiny_grid_config(tmp_path, tiny_llama, data_dir, tmp_path / "out", **doses)
    main(["run", "--config", str(path), "--no-summary"])
    monkeypatch.setitem(conditions.EFFECTS, "gain", (conditions.BASE, conditions.TEST))
    capsys.readouterr()
    main(["summarize", str(tmp_path / "out")])
    assert "gain (test-base)" in capsys.readouterr().out
    drawn = []
    dose_response = plots.dose_response
    monkeypatch.setattr(
        plots, "dose_response", lambda configs: drawn.append(dose_response(configs)) or drawn[-1]
    )
    main(["report", str(tmp_path / "out")])
    page = (tmp_path / "out" / "report.html").read_text()
    dose_table = page.split("<h2>The bias against the dose</h2>", 1)[1].split("<h2>", 1)[0]
    assert re.search(r"<th[^>]*>gain</th>", dose_table), "the dose table has no gain column"
    (figure,) = drawn
    labels = {t.get_text() for ax in figure.axes if ax.get_legend() for t in ax.get_legend().texts}
    assert "gain (test - base)" in labels, labels

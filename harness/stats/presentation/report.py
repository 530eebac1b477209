"""One self-contained HTML page per results folder: for every cell and model, what made the results
(settings, their hash, library versions, base), the summary table, the share of changed
predictions, the exposure test, and the hierarchical Bayesian fits where `analyze` has run. Figures
are inline PNGs and the only script sorts the tables: the file opens with no network."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from harness import results
from harness.core.design import conditions
from harness.core.design.power import ALPHA
from harness.core.plumbing.errors import read_json_object
from harness.stats.bayes import plots
from harness.stats.bayes.analysis import tasks_excluding_zero
from harness.stats.presentation import summary_text
from harness.stats.presentation.page import SORT, STYLE, details, esc, figure, points, table
from harness.stats.summary import confirmation, diagnostics, exposure_summary, summary, verdict


def provenance(mdir: Path) -> str:
    """The settings and versions of the runs that wrote this folder (its manifests; else its units)."""
    fix = "delete it; the next run of the grid writes it again"
    manifests = [read_json_object(p, str(p), fix) for p in results.manifest_paths(mdir)]
    first = results.any_unit(mdir)
    units = [results.read_unit(first)] if first else []
    if manifests:
        m = manifests[0]
        versions = ", ".join(f"{k} {v}" for k, v in sorted(m.get("versions", {}).items()))
        return (
            f"<p>base <b>{esc(m['config'].get('base'))}</b>, settings "
            f"hash <code>{esc(m.get('settings_hash'))}</code>, "
            f"{len(manifests)} run manifest(s), started {esc(m.get('started'))}; {esc(versions)}</p>"
            + details("settings", json.dumps(m["config"], indent=1))
        )
    if units and "settings" in units[0]:
        return (
            f"<p>settings hash <code>{esc(units[0].get('settings_hash'))}</code> (no run manifest here)</p>"
            + details("settings", json.dumps(units[0]["settings"], indent=1))
        )
    return "<p>No manifest or unit record here: accuracies only (results made elsewhere).</p>"


def summary_section(config: dict, tasks: list[dict]) -> str:
    effects = [e for e in conditions.EFFECTS if verdict.key(e, "mean") in config]
    cols = summary_text.effect_columns(effects)
    # the primary effect's columns go unnamed, as the study's table had them: p, p_BH; others' are named
    headers = ["task"] + [h if h == e or e == conditions.PRIMARY else f"{h} ({e})" for e, h, _, kind in cols]
    rows = []
    for t in sorted(tasks, key=lambda t: -t[verdict.key(conditions.PRIMARY, "mean")]):
        row = [(t["task"], t["task"])]
        for e, _, key, kind in cols:
            if kind == "p":
                row.append((f"{t[key]:.4f}", t[key]) if np.isfinite(t[key]) else ("n/a", 2.0))
            elif kind == "mde":
                row.append(points(t[key], signed=False))
            else:  # bold where its BH-adjusted p-value is significant
                row.append(
                    points(t[key], e in conditions.TESTED and t[verdict.key(e, "p_adjusted")] <= ALPHA)
                )
        rows.append(row)
    primary = conditions.PRIMARY
    means = ", ".join(
        f"{esc(conditions.label(e, ' - '))} <b>{esc(verdict.pts(config[verdict.key(e, 'mean')]))}</b> pts"
        for e in effects
    )
    notes = summary_text.not_adapted_lines(tasks, indent="") + verdict.uninformative_lines(tasks, indent="")
    skipped = "".join(f"<br>{esc(line)}" for line in notes)
    head = (
        f"<p>{esc(config['tasks'])} tasks, {esc(config['rows'])} subsample rows. "
        f"{means[:1].upper()}{means[1:]}"
        + f"; tasks with {primary} &gt; 0: {esc(config[f'tasks_positive_{primary}'])}, "
        f"&lt; 0: {esc(config[f'tasks_negative_{primary}'])}; "
        f"median MDE {verdict.mde_text(config[f'detectable_{primary}_median'])}"
        + (f"; {esc(verdict.pooled_line(config))}" if config.get(verdict.key(primary, "units")) else "")
        + (f"; {esc(confirmation.line(config['confirmation']))}" if config.get("confirmation") else "")
        + f".{skipped}</p>"
    )
    caption = (
        "Per task, in accuracy points: means over subsamples with two-sided 95% intervals, two-sided paired "
        f"permutation p-values with Benjamini-Hochberg adjustment over tasks; bold: p_BH <= {ALPHA}. "
        "Ordered by bias; click a header to sort. " + summary_text.DETECTABLE_METHOD
    )
    bias_mean = verdict.key(conditions.PRIMARY, "mean")
    fig = figure(
        plots.png(plots.task_effects(sorted(tasks, key=lambda t: t[bias_mean]))),
        "Per task: the mean boost, bias and (where run) planted leak over subsamples, in accuracy points. "
        "A bias near 0 beside a clearly positive leak is the study's message: seen unlabeled, not inflated.",
    )
    return head + table(headers, rows, caption) + fig


def dose_section(configs: list[dict]) -> str:
    """Where a run swept a method's dose: bias, leak and boost against it, with intervals, and a row per
    dose (its verdict and its collapsed units); nothing where no model has a dose."""
    dosed = [c for c in configs if plots.dose_of(c["model"])]
    if not dosed:
        return ""
    primary = conditions.PRIMARY
    effects = [
        e
        for e in conditions.shown()
        if e in conditions.TESTED or any(verdict.key(e, "mean") in c for c in dosed)
    ]
    rows = []
    for c in dosed:
        row = [(c["model"], c["model"])]
        for e in effects:
            if verdict.key(e, "mean") not in c:  # a run without the leak: no leak to show
                row.append(("not run", None))
                continue
            low, high = c[verdict.key(e, "low")], c[verdict.key(e, "high")]
            text = f"{verdict.pts(c[verdict.key(e, 'mean')])} {verdict.interval(low, high)}"
            row.append((text, c[verdict.key(e, "mean")]))
        one = c.get(f"{primary}_one_class", 0)
        row += [
            (f"{one} of {c[f'{primary}_units']}", one),
            (c[f"{primary}_verdict"], c[f"{primary}_verdict"]),
        ]
        rows.append(row)
    caption = (
        "Per model and dose, pooled over every task's units, in points, with two-sided 95% intervals; "
        "collapsed: units whose extra and test models give every test document the same one class."
    )
    headers = ["model", *effects, "collapsed", "verdict"]
    fig = figure(
        plots.png(plots.dose_response(dosed)),
        "The bias (test - extra), the planted leak and the boost against the dose, with 95% intervals.",
    )
    return "<h2>The bias against the dose</h2>" + table(headers, rows, caption) + fig


def changes_section(mdir: Path) -> str:
    changes = summary.prediction_changes(mdir)
    if changes.empty:
        return ""
    pairs = [c for c in changes.columns if "/" in c]
    rows = [
        [(r["task"], r["task"]), (r["docs"], r["docs"])] + [(f"{r[p]:.1%}", r[p]) for p in pairs]
        for r in changes.to_dict("records")
    ]
    out = "<h3>Changed predictions</h3>" + table(
        ["task", "docs", *pairs],
        rows,
        "Share of test predictions that differ between two conditions: a TAPT "
        "model that changes no prediction cannot change an accuracy.",
    )
    collapsed = summary.one_class(mdir)
    if not summary_text.any_collapsed(collapsed):
        return out
    shown = [c for c in conditions.ALL if c in collapsed.columns]
    rows = [
        [(r["task"], r["task"]), (r["units"], r["units"])] + [(f"{r[c]:.0%}", r[c]) for c in shown]
        for r in collapsed.to_dict("records")
    ]
    caption = (
        "Share of units whose model gives every test document one class: a collapsed model. A bias "
        "between two collapsed models does not measure the method's."
    )
    return out + "<h3>Collapsed models</h3>" + table(["task", "units", *shown], rows, caption)


def methods_section(mdir: Path) -> str:
    records = diagnostics.method_records(mdir)
    if records.empty:
        return ""
    columns = diagnostics.columns(records)

    def cell(x, column):
        if pd.isna(x):
            return ("-", -1e9)
        return (f"{x:.1%}" if diagnostics.share(records, column) else f"{x:.3g}", x)

    rows = [
        [(r["task"], r["task"]), (r["condition"], r["condition"])] + [cell(r[c], c) for c in columns]
        for r in records.to_dict("records")
    ]
    return "<h3>What the method did</h3>" + table(
        ["task", "condition", *columns],
        rows,
        "Per condition, means over units of what the method's training records say: the documents it "
        "learned from, its optimizer steps, and what the method reports of itself.",
    )


def exposure_section(mdir: Path, tasks: list[dict]) -> str:
    shares = exposure_summary.exposure_shares(results.exposure_tests(mdir))
    if not shares:
        return ""
    effects = {t["task"]: t for t in tasks}
    conds = [c for c in conditions.ALL if c != conditions.BASE and any(c in s for s in shares)]
    headers = ["task", *conditions.READ_TEST] + [f"{c}: {w}" for c in conds for w in ("text", "labels")]
    rows = []
    for s in shares:
        t = effects.get(s["task"], {})
        row = [(s["task"], s["task"])]
        row += [points(t.get(verdict.key(e, "mean"), np.nan)) for e in conditions.READ_TEST]
        shown = {
            c: {"text": s[c]["text"], "label": exposure_summary.label_share(s[c])} for c in conds if c in s
        }
        row += [
            (f"{shown[c][w]:.0%}", shown[c][w]) if c in s else ("-", -1)
            for c in conds
            for w in ("text", "label")
        ]
        rows.append(row)
    caption = (
        "Exposure test: the share of units whose model the two-sample test (test vs extra documents, "
        f"each model against base, one-sided permutation p <= {ALPHA}) finds to have seen the test "
        "split's text and its labels (for test and leak: the twin label statistic, each model's margins on "
        "the text it read against the extra model's), beside the task's bias and leak."
    )
    return "<h3>Exposure test</h3>" + table(headers, rows, caption)


def calibration_section(root: Path) -> str:
    """The detectors' error rates on models of known exposure, where `contamination calibrate` wrote them."""
    cal = results.calibration(root)
    if not cal:
        return ""

    def cell(r: dict) -> tuple[str, float]:
        if not r["models"]:
            return "-", -1
        return f"{r['flagged']}/{r['models']} {r['rate']:.0%} [{r['low']:.0%}, {r['high']:.0%}]", r["rate"]

    rows = [
        [
            (r.get("method", ""), r.get("method", "")),  # files written before methods lack it
            (r["mode"], r["mode"]),
            (r["detector"], r["detector"]),
            (r["sees"], r["sees"]),
            cell(r["false_positive"]),
            cell(r["power"]),
        ]
        for r in cal["rates"]
    ]
    caption = (
        f"Each detector's flag rate (p <= {ALPHA}, 95% Wilson interval) on models of known exposure: "
        "false positives on the models that did not see what it claims to see (the test split's text, or its "
        "labels), power on those that did. A 'not seen' from a detector means only as much as its power."
    )
    return "<h2>Detector error rates</h2>" + table(
        ["method", "mode", "detector", "sees", "false positives", "power"], rows, caption
    )


def bayes_section(analysis: dict) -> str:
    records = analysis.get("fits", [])
    if not records:
        return ""
    headers = ["cell", "effect", "beta", "HDI", "r-hat", "div", "ESS", "eq.11 pts", "eq.11 HDI", "observed"]
    rows = [
        [
            (f"m={r['m']} n={r['n']}", r["m"] * 10000 + r["n"]),
            (r["effect"], r["effect"]),
            (f"{r['beta_mean']:+.3f}", r["beta_mean"]),
            (f"[{r['beta_hdi'][0]:+.3f}, {r['beta_hdi'][1]:+.3f}]", r["beta_hdi"][0]),
            (f"{r['rhat_max']:.3f}", r["rhat_max"]),
            (r["divergences"], r["divergences"]),
            (f"{r['beta_ess_bulk']:.0f}", r["beta_ess_bulk"]),
            points(r["average_difference"]["mean"]),
            (
                f"[{100 * r['average_difference']['hdi'][0]:+.2f}, "
                f"{100 * r['average_difference']['hdi'][1]:+.2f}]",
                r["average_difference"]["hdi"][0],
            ),
            points(r["average_difference"]["observed"]),
        ]
        for r in records
    ]
    prob = f"{100 * records[0]['hdi_prob']:.0f}%"
    out = "<h2>Hierarchical Bayesian analysis</h2>" + table(
        headers,
        rows,
        f"Per (m, n) cell and effect: beta with its {prob} HDI and diagnostics, and the eq. "
        "11 average accuracy difference (posterior predictive) against the observed one.",
    )
    out += "<pre>" + esc("\n".join(tasks_excluding_zero(r) for r in records)) + "</pre>"
    out += figure(
        plots.png(plots.record_intervals(records, per_task=False)),
        "Eq. 11: per cell and effect, the posterior predictive average accuracy "
        f"difference (dot, {prob} HDI) and the observed one (x).",
    )
    out += figure(
        plots.png(plots.record_intervals(records, per_task=True)),
        "Eq. 12: the same per task; a task whose HDI excludes 0 is listed above.",
    )
    if analysis.get("checks"):
        from harness.stats.bayes.checks import format_checks

        out += (
            "<h3>Model checks</h3><pre>"
            + esc("\n".join(format_checks(c) for c in analysis["checks"]))
            + "</pre>"
        )
    return out


TITLE = "tapt-bench report: "  # every page's title starts so: an --out that does not is not replaced


def build(root: str | Path, analysis: dict | None = None, accuracies: pd.DataFrame | None = None) -> str:
    """The report of every cell and model under `root` (and the analysis records, where given);
    `accuracies`: root's, where the caller has already collected them."""
    root = Path(root)
    s = summary.of_folder(root, accuracies=accuracies)
    parts = [
        f"<h1>tapt-bench report: {esc(root.resolve().name)}</h1>",
        f"<p>{esc(root.resolve())}, made {time.strftime('%Y-%m-%d %H:%M')}. "
        "For each task and seeded subsample, "
        "<i>base</i> (no TAPT), <i>extra</i> (TAPT on unlabeled independent text), <i>test</i> (TAPT on the "
        "unlabeled test text) and, where run, <i>leak</i> (TAPT "
        "on test with its answers: the positive control) "
        "are scored on the same test docs. Boost = extra - base; bias = test - extra.</p>",
    ]
    parts.append(dose_section(s["configs"]))
    for c in s["configs"]:
        mdir = results.model_dir(root, c["m"], c["n"], c["model"])
        tasks = [t for t in s["tasks"] if (t["m"], t["n"], t["model"]) == (c["m"], c["n"], c["model"])]
        parts += [f"<h2>m={c['m']} n={c['n']} model {esc(c['model'])}</h2>", provenance(mdir)]
        parts += [summary_section(c, tasks), changes_section(mdir), methods_section(mdir)]
        parts.append(exposure_section(mdir, tasks))
    parts.append(calibration_section(root))
    if analysis:
        parts.append(bayes_section(analysis))
    else:
        parts.append(
            "<h2>Hierarchical Bayesian analysis</h2><p>Not run for this report: pass <code>--analyze</code>, "
            "or <code>--analysis FILE</code> from <code>tapt-bench analyze RESULTS --out FILE</code>.</p>"
        )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{TITLE}{esc(root.name)}</title>'
        f"<style>{STYLE}</style></head><body>{''.join(parts)}<script>{SORT}</script></body></html>"
    )

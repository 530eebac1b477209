"""Whether a model folder's result is confirmed: its config declared a plan before it ran
(harness.core.design.study_plan), and its records show that plan was kept.

Confirmed needs all of: a confirmatory config; every planned unit finished (its tasks times its
subsamples, no more); every unit recorded one commit of the product code, without uncommitted changes;
every unit and run read the same config (its hash). The test is the plan's by construction: the summary
reads the sides, level, family and bound from the plan. Anything else is exploratory, with each reason.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from harness import results
from harness.core.design import study_plan

CONFIRMED, EXPLORATORY = "confirmed", "exploratory"


def confirmation(mdir: Path) -> dict[str, Any]:
    """{'status', 'why' (reasons it is not confirmed), 'plan' (the config's test), 'commit', 'config' (the
    config its run recorded, its plan among its keys; the summary reads its test from it)}."""
    found = results.manifests(mdir)
    configs = [(m.get("config") or {}, m.get("config_hash")) for m in found]
    units = {tdir.name: results.finished(tdir) for tdir in results.task_dirs(mdir)}
    records = [r for per_task in units.values() for r in per_task.values()]
    draws = dict(Counter(results.train_draw_of(r) for r in records))
    edited = [
        path.name
        for path, (config, recorded) in zip(results.manifest_paths(mdir), configs)
        if config and recorded and study_plan.config_hash(config) != recorded
    ]
    broken = [line for tdir in results.task_dirs(mdir) for line in results.damaged(tdir, units[tdir.name])]
    damage = [  # said in every summary, a plan or none: the numbers read are not the run's
        f"{len(broken)} unit file(s) disagree with their hash or their tables, e.g. {line}: restore "
        "them from where the run wrote them, or rerun those units"
        for line in broken[:1]
    ]
    if not configs:
        why = "no run manifest here (results made elsewhere): no plan on record"
        return {"status": EXPLORATORY, "why": [why, *damage], "config": {}, "draws": draws}
    declared = [(c, h) for c, h in configs if c.get("confirmatory")]
    if not declared:
        why = "its config declares no plan (confirmatory: true), so its test was not fixed before it ran"
        return {"status": EXPLORATORY, "why": [why, *damage], "config": configs[0][0], "draws": draws}
    plan, planned_hash = declared[0]  # the config that declares the plan, and its hash
    why = [
        f"{name} was edited after its run wrote it (its config no longer matches its hash): the plan it "
        "states is not the one the run read"
        for name in edited
    ]
    if len({h for _, h in configs}) > 1:
        why.append(
            f"its {len(configs)} runs read different configs (hashes {sorted({str(h) for _, h in configs})})"
        )
    why += missing_units(plan, units)
    why += damage
    commits = code_reasons(records, planned_hash, why)
    test = {k: plan.get(k) for k in ("sides", "alpha", "family", "equivalence_bound", "seed", "subsamples")}
    commit = next(iter(commits), None)
    status = EXPLORATORY if why else CONFIRMED
    left_out = [s for screen in results.screens(mdir) for s in screen["tasks"] if not s["entered"]]
    return {
        "status": status,
        "why": why,
        "plan": test,
        "commit": commit,
        "config": plan,
        "left_out": left_out,
        "draws": draws,
    }


def code_reasons(records: list[dict], planned_hash, why: list[str]) -> Counter:
    """The units' code, each way it breaks a plan added to `why` (no commit recorded, several commits,
    uncommitted changes, another config); the commits and their units."""
    codes = [r.get("code") or {} for r in records]
    unrecorded = sum(not c.get("commit") for c in codes)
    if unrecorded:
        why.append(f"{unrecorded} units record no commit of the code")
    commits = Counter(c["commit"][:10] for c in codes if c.get("commit"))
    if len(commits) > 1:
        why.append(f"its units ran on {len(commits)} commits of the code ({dict(commits)})")
    dirty = sum(bool(c.get("dirty")) for c in codes)
    if dirty:
        why.append(f"{dirty} units ran on code with uncommitted changes")
    other = sum(c.get("config_hash") not in (None, planned_hash) for c in codes)
    if other:
        why.append(f"{other} units read another config than the plan's")
    return commits


def missing_units(plan: dict, units: dict[str, dict[int, dict]]) -> list[str]:
    """The planned units that did not finish, and any beyond the plan."""
    planned, tasks = int(plan.get("subsamples", 0)), plan.get("tasks") or []
    want = len(tasks) * planned if tasks != ["all"] else len(units) * planned
    have = sum(len(u) for u in units.values())
    why = []
    short = {t: sorted(set(range(planned)) - set(u)) for t, u in units.items()}
    short = {t: ks for t, ks in short.items() if ks}
    if have < want or short:
        shown = "; ".join(f"{t} {ks}" for t, ks in short.items())
        why.append(f"{have} of its {want} planned units finished" + (f" (missing: {shown})" if shown else ""))
    beyond = sum(k >= planned for u in units.values() for k in u)
    if beyond:
        why.append(f"{beyond} units beyond the planned {planned} a task")
    return why


def post_hoc(found: dict[str, Any], tasks: list[str], planned: list[str]) -> dict[str, Any]:
    """The confirmation of a folder read on `tasks` alone, chosen after its data: exploratory, whatever
    it was, with the tasks its config planned and these leave out named."""
    dropped = [t for t in planned if t not in tasks]
    why = (
        f"post hoc: read on {len(tasks)} tasks ({', '.join(tasks)}), chosen after the data"
        + (f" (left out: {', '.join(dropped)})" if dropped else "")
        + "; a sensitivity analysis, not the plan's answer"
    )
    return found | {"status": EXPLORATORY, "why": [why, *found.get("why", [])]}


def line(found: dict[str, Any]) -> str:
    """The status in one sentence, for the summary and the report, with the tasks the plan's screen
    left out before any unit (harness.study.screen)."""
    left = found.get("left_out") or []
    screen = (
        "; left out before any unit, the base not above chance on their train and extra documents: "
        + ", ".join(
            f"{s['task']} ({s['correct'] / s['documents']:.1%} against {s['chance']:.1%})" for s in left
        )
        if left
        else ""
    )
    if found["status"] == CONFIRMED:
        p = found["plan"]
        sides = "two-sided" if p["sides"] == "two" else "one-sided"
        return (
            f"{CONFIRMED}: every planned unit ({p['subsamples']} a task, seed {p['seed']}) ran on commit "
            f"{found['commit']} with no uncommitted change, and is read with the plan's test ({sides}, "
            f"alpha {p['alpha']}, BH over the {p['family']}, bound {p['equivalence_bound']:g} pts){screen}"
        )
    return f"{EXPLORATORY}: " + "; ".join(found["why"]) + screen


def of_root(root: str | Path) -> dict[tuple[int, int, str], dict[str, Any]]:
    """Each model folder's confirmation under root, by (m, n, model)."""
    return {k: confirmation(mdir) for k, mdir in results.model_dirs(root).items()}

"""What a run checks of its results folder before it writes anything: a confirmatory plan resumed only
as it was fixed, and finished units made with the run's settings from the content it reads (harness.grid.
fingerprints); with --overwrite, the shard's other units deleted, each said."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from harness import results
from harness.core.design import study_plan
from harness.core.plumbing.errors import SettingsError, read_json_object
from harness.core.plumbing.settings import differences
from harness.grid.configuration import plan
from harness.grid.configuration.plan import RunPlan
from harness.grid.unit import fingerprints

log = logging.getLogger("tapt_bench.grid")


def stale_records(planned: RunPlan) -> list[tuple[Path, int, dict]]:
    """Finished units of the run's tasks (any shard) whose recorded settings differ from the plan's."""
    return [
        (planned.task_dir(slug), k, done.get("settings", {}))
        for slug in planned.config.slugs
        for k, done in results.finished(planned.task_dir(slug)).items()
        if not results.same_settings(done.get("settings"), planned.recorded)
    ]


def check_inputs(planned: RunPlan, overwrite: bool) -> None:
    """Refuse a run whose finished units read other content than it would; with `overwrite`, delete them."""
    finished = {slug: results.finished(planned.task_dir(slug)) for slug in planned.config.slugs}
    found = fingerprints.changed(planned, {slug: units for slug, units in finished.items() if units})
    if not found:
        return
    if overwrite:
        for slug, k, _ in found:
            results.remove_unit(planned.task_dir(slug), k)
        for tdir in sorted({planned.task_dir(slug) for slug, _, _ in found}):
            results.rebuild(tdir)
        log.info("--overwrite: removed %d unit(s) that read other content", len(found))
        return
    slug, k, what = found[0]
    raise SettingsError(
        f"{planned.folder} holds {len(found)} finished unit(s) that read other content than this run would "
        f"(e.g. {slug} subsample {k}: {what}). Their numbers would be pooled across inputs that differ. "
        "Write to a new `out`, or pass --overwrite to delete those units and recompute them"
    )


def check_plan_kept(planned: RunPlan) -> None:
    """A confirmatory run resumes only its own plan: where a run of the folder read another config (a key
    changed since its first round), refuse, naming each changed key; a manifest whose config no longer
    matches its hash (edited by hand) is refused the same way."""
    if not planned.config.plan.confirmatory:
        return
    now = {k: v for k, v in planned.config.keys().items() if k not in study_plan.WHERE}
    for path in results.manifest_paths(planned.folder):
        found = read_json_object(path, str(path), "delete it; the next run writes it again")
        config = found.get("config") or {}
        if study_plan.config_hash(config) != found.get("config_hash"):
            raise SettingsError(
                f"{path} was edited after its run wrote it (its config no longer matches its hash "
                f"{found.get('config_hash')}): a confirmatory plan cannot be resumed from it; restore it"
            )
        if found.get("config_hash") != planned.config_hash:
            changed = sorted(
                k for k in set(now) | set(config) if k not in study_plan.WHERE and now.get(k) != config.get(k)
            )
            shown = "; ".join(f"{k}: {config.get(k)!r} then, {now.get(k)!r} now" for k in changed)
            raise SettingsError(
                f"{planned.folder} holds a confirmatory plan whose first runs read another config ({shown}); "
                "a plan is fixed before it runs: restore those keys to resume it, or run the new config "
                "into another --out as a new plan"
            )


def check_settings(planned: RunPlan, overwrite: bool, shard: tuple[int, int] = (0, 1)) -> None:
    """Refuse to add units to results made with other settings, or that read other content (data, task,
    weights: harness.grid.unit.fingerprints); with `overwrite`, delete this shard's such units (another
    shard's stay for its own rerun), saying which."""
    check_plan_kept(planned)
    check_inputs(planned, overwrite)
    stale = stale_records(planned)
    if not stale:
        return
    if overwrite:
        mine = {(planned.task_dir(key.slug), key.k) for key in plan.shard_keys(planned.config, shard)}
        own = [(tdir, k) for tdir, k, _ in stale if (tdir, k) in mine]
        for tdir, k in own:
            results.remove_unit(tdir, k)
        for tdir in sorted({tdir for tdir, _ in own}):
            results.rebuild(tdir, planned.recorded)
        said = ", ".join(f"{tdir.name} {k}" for tdir, k in own) or "none"
        print(
            f"--overwrite: deleted {len(own)} unit(s) of shard {shard[0]}/{shard[1]} made with other "
            f"settings: {said}",
            file=sys.stderr,
        )
        log.info("--overwrite: removed %d unit(s) made with other settings (%s)", len(own), said)
        kept = len(stale) - len(own)
        if kept:
            print(
                f"--overwrite: kept {kept} unit(s) of the other shards made with other settings: rerun "
                "each of those shards with --overwrite before reading the folder (till then it is stale)",
                file=sys.stderr,
            )
        return
    tdir, k, old = stale[0]
    changed = differences(old, planned.recorded) if old else ["no settings recorded (an older tapt-bench)"]
    raise SettingsError(
        f"{planned.folder} holds {len(stale)} finished unit(s) made with other settings "
        f"(e.g. {tdir.name} subsample {k}):\n  " + "\n  ".join(changed) + "\n"
        "Their numbers would be mixed with this run's. Either write to a new `out`, or pass "
        "--overwrite to delete those units and recompute them with these settings."
    )

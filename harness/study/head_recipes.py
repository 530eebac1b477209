"""The classifier head's named recipes, a ladder the pilot climbs until the heads of most tasks learn
(harness.study.pilot): each recipe's values go into the config and into every task's override of them."""

from __future__ import annotations

from pathlib import Path

# the classifier head's named recipes, a ladder the pilot climbs: the config's own (the study's 3 epochs at
# 5e-5 by default), then longer ones for an encoder whose head does not learn in the study's 9 steps at
# m 50 (all-MiniLM-L6-v2, say)
HEAD_RECIPES = {
    "study": {},
    "long": {"clf_epochs": 10.0, "clf_lr": 1e-4},
    "longer": {"clf_epochs": 20.0, "clf_lr": 3e-4},
}


def recipe_text(name: str) -> str:
    keys = HEAD_RECIPES.get(name, {})
    return ", ".join(f"{k} {v:g}" for k, v in keys.items()) or "the config's own"


def with_recipe(keys: dict, name: str) -> dict:
    """Config keys with a head recipe's values, in the config and in every task's override of them."""
    recipe = HEAD_RECIPES[name]
    overrides = {
        task: {k: recipe.get(k, v) for k, v in o.items()}
        for task, o in (keys.get("task_overrides") or {}).items()
    }
    return keys | recipe | ({"task_overrides": overrides} if overrides else {})


def recipe_folder(out: Path, recipe: str) -> Path:
    """Where a recipe's pilot units go: out itself for the config's own, out/head-<name> for another."""
    return out if recipe == "study" else out / f"head-{recipe}"

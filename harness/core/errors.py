"""The errors a user can fix: every message names the file, key or field and how to fix it."""

import json
from pathlib import Path
from typing import Any


class UserError(ValueError):
    """Bad input (a setting, a file, a path); the CLI prints the message without a traceback."""


class TaskError(UserError):
    """A task YAML or its data is unusable; the message names the task and the fix."""


class SettingsError(UserError):
    """A setting has the wrong type or range, or settings disagree with results already written.

    `key` names the setting when one is at fault, so each entry point can name it its own way
    (a config key, a CLI flag).
    """

    def __init__(self, message: str, key: str | None = None, problem: str | None = None):
        super().__init__(message)
        self.key, self.problem = key, problem


def read_json_object(path: str | Path, what: str, fix: str) -> dict[str, Any]:
    """A JSON file that must hold an object: a UserError naming it (`what`) and `fix` where it does not."""
    try:
        value = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{what}: not valid JSON ({type(err).__name__}: {err}); {fix}") from err
    if not isinstance(value, dict):
        raise UserError(f"{what}: a JSON object was expected, got {type(value).__name__}; {fix}")
    return value

"""The errors a user can fix: every message names the file, key or field and how to fix it."""


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

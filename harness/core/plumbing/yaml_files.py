"""YAML as the project reads it: a key written twice in one mapping is refused, naming both lines (PyYAML
keeps the last in silence, so `m: 2` then `m: 4` would run at m 4); lm-eval's task YAMLs read with their
`!function` tags kept as text (`TaskYaml`: the project reads a task's facts, never calls its functions)."""

from __future__ import annotations

import yaml


class DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping names one key twice; the message names both lines (1-based)."""


class UniqueKeys(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key written twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise DuplicateKey(
                    None,
                    None,
                    f"key {key!r} is written twice, on line {seen[key]} and line {line}; keep one",
                    key_node.start_mark,
                )
            seen.setdefault(key, line) if isinstance(key, str | int | float | bool) else None
        return super().construct_mapping(node, deep)


class TaskYaml(UniqueKeys):
    """An lm-eval task YAML: a `!function name` tag is read as its text, "!function name"."""

    def function_text(self, node) -> str:
        return f"!function {self.construct_scalar(node)}"


TaskYaml.add_constructor("!function", TaskYaml.function_text)


def load(text: str, loader: type[UniqueKeys] = UniqueKeys):
    """The YAML document in `text`; a key written twice raises DuplicateKey (a yaml.YAMLError)."""
    return yaml.load(text, Loader=loader)

"""What made a result: the versions of the libraries that compute it, recorded with every unit and adapter."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

LIBRARIES = ("torch", "transformers", "trl", "peft", "bitsandbytes", "datasets", "lm_eval", "accelerate")


def library_versions() -> dict[str, str]:
    found = {}
    for lib in LIBRARIES:
        try:
            found[lib] = version(lib.replace("_", "-"))
        except PackageNotFoundError:
            found[lib] = "not installed"
    return found

"""Old names of moved modules, kept for one release: importing `package.<old>` gives the module at its
new name, with a DeprecationWarning that names it. Written by hand: the import system has no alias for
a module."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings


class OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A finder of `package.<old name>` for each old name in `moved` (old -> new dotted name); asked
    last, so that a module that exists is always found first."""

    def __init__(self, package: str, moved: dict[str, str]) -> None:
        self.package, self.moved = package, moved

    def find_spec(self, name, path=None, target=None):
        old = name.removeprefix(f"{self.package}.")
        return importlib.util.spec_from_loader(name, self) if old in self.moved else None

    def create_module(self, spec):
        new = self.moved[spec.name.removeprefix(f"{self.package}.")]
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        pass


def keep_old_names(package: str, moved: dict[str, str]) -> None:
    """Answer the old names of `package`'s moved modules (once per process)."""
    if not any(isinstance(f, OldNames) and f.package == package for f in sys.meta_path):
        sys.meta_path.append(OldNames(package, moved))

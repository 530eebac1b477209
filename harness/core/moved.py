"""Old names of moved modules, kept for one release: importing `package.<old>` gives the module at its
new name, with a DeprecationWarning that names it. Written by hand: the import system has no alias for
a module. It is consulted only for the package's own submodules that are not found (a path entry of the
package), never for any other import."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

_PACKAGES: dict[str, OldNames] = {}  # the path entry each package's old names answer at


class OldNames(importlib.abc.PathEntryFinder, importlib.abc.Loader):
    """The finder of `package.<old name>` for each old name in `moved` (old -> new dotted name), asked
    after the package's own folder, so that a module that exists is always found first."""

    def __init__(self, package: str, moved: dict[str, str]) -> None:
        self.package, self.moved = package, moved

    def find_spec(self, fullname, target=None):
        old = fullname.removeprefix(f"{self.package}.")
        return importlib.util.spec_from_loader(fullname, self) if old in self.moved else None

    def create_module(self, spec):
        new = self.moved[spec.name.removeprefix(f"{self.package}.")]
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        pass


def _hook(entry: str) -> OldNames:
    if entry in _PACKAGES:
        return _PACKAGES[entry]
    raise ImportError(entry)


def keep_old_names(package: str, moved: dict[str, str]) -> None:
    """Answer the old names of `package`'s moved modules (once per process)."""
    entry = f"<the moved modules of {package}>"
    _PACKAGES[entry] = OldNames(package, moved)
    path = sys.modules[package].__path__
    if entry not in path:
        path.append(entry)
    if _hook not in sys.path_hooks:
        sys.path_hooks.append(_hook)

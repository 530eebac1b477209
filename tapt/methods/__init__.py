"""Adaptation methods the design audits: each adapts the loaded base on one split's documents, once per
condition (extra, test, leak), and the unit scores what it returns.

A method is a `Method` value: its name, the flows it serves, its settings dataclass and one `adapt` call
(tapt/methods/contract.py). A built-in is a module or folder of this package with a module-level `METHOD`; a
method from outside the package (tapt/methods/registry.py) is named `package.module:attr` or
`path/to/file.py:attr` (a `Method` value), or installed as an entry point of the group `tapt_bench.methods`,
as lm-eval's models and pytest's plugins are. The documents an `adapt` call receives carry the gold `label`
column only for the `leak` condition: every other condition gets them without it.

What a method promises is checked where it can be: the grid fingerprints the base and stops the run when
a restore does not give it back unchanged (harness.core.engine.weights); a condition whose method learned
from no document (the record's `learned_from` is 0, or it took no optimizer step), or whose model scores
every test document exactly as the base does, is marked as not adapted and kept out of the effects.
Naming a method by file or module runs that file's top-level code, as installing a pytest plugin does.
"""

from harness.core.plumbing.recipe import recipe_table  # noqa: F401  (a method file's import)
from harness.core.plumbing.settings import Settings  # noqa: F401  (a method's settings subclass it)
from tapt.methods.contract import (  # noqa: F401  (the contract, as methods and plug-ins import it)
    COUNTS,
    DIAGNOSTICS,
    GREEDY,
    LEARNED_FROM,
    MOVED,
    NAME,
    SAMPLED,
    VOTES,
    Adapted,
    Inputs,
    Method,
    nothing_learned,
    numeric,
    vote_agreement,
)
from tapt.methods.registry import METHODS, builtin, check_method, find  # noqa: F401

"""The former name of tapt.methods.test_time_rl.recipe, kept for one release: a plug-in imports from
harness.api instead."""

import warnings

from tapt.methods.test_time_rl.recipe import *  # noqa: F403

warnings.warn(
    "tapt.ttrl_recipe is now tapt.methods.test_time_rl.recipe; a plug-in imports from harness.api "
    "(this name goes in the next release)",
    DeprecationWarning,
    stacklevel=2,
)

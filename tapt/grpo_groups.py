"""The former name of tapt.methods.test_time_rl.grpo_groups, kept for one release: a plug-in imports from
harness.api instead."""

import warnings

from tapt.methods.test_time_rl.grpo_groups import *  # noqa: F403

warnings.warn(
    "tapt.grpo_groups is now tapt.methods.test_time_rl.grpo_groups; a plug-in imports from harness.api "
    "(this name goes in the next release)",
    DeprecationWarning,
    stacklevel=2,
)

"""The former name of harness.tasks.protocol, kept for one release: import from harness.api instead."""

import warnings

from harness.tasks.protocol import *  # noqa: F403
from harness.tasks.protocol import answered, find_spec, subsample_docs  # noqa: F401

warnings.warn(
    "harness.tasks.splits is now harness.tasks.protocol; a plug-in imports from harness.api "
    "(this name goes in the next release)",
    DeprecationWarning,
    stacklevel=2,
)

"""The former name of tapt.methods.raw_text.pretrain, kept for one release: a plug-in imports from
harness.api instead."""

import warnings

from tapt.methods.raw_text.pretrain import *  # noqa: F403

warnings.warn(
    "tapt.raw_text is now tapt.methods.raw_text.pretrain; a plug-in imports from harness.api "
    "(this name goes in the next release)",
    DeprecationWarning,
    stacklevel=2,
)

"""The one lazy import of litellm: slow to import (5-12 s), so only the code that calls a model loads it, and
always with the local model cost map (no network fetch at import)."""

from __future__ import annotations

import os
from typing import Any


def litellm() -> Any:
    """The litellm module, imported on first use with LITELLM_LOCAL_MODEL_COST_MAP set and debug hints off."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm as module

    module.suppress_debug_info = True
    return module

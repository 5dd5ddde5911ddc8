"""What the command line sets in the libraries under the LLM judges, and a host application may.

Importing consensus-eval changes nothing global. The CLI calls :func:`quiet_libraries` before its
first judge is built; a program using the Python API calls it if it wants the same behaviour.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

#: loggers whose lines would only repeat what the store records for every attempt (and could echo
#: request details)
LIBRARY_LOGGERS = ("instructor", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx")


#: quiet_libraries was called: litellm is made quiet when it is imported (:func:`litellm_imported`)
_requested = False


def quiet_libraries() -> None:
    """Use litellm's bundled price map (no download at import), silence the libraries' loggers and
    litellm's debug banner and telemetry. Call it before litellm is first imported.

    litellm is not imported for this (about 5 s and 200 MB, which a run of the rules judge alone never
    needs): its settings are made now if it is imported already, else when the LLM judge layer imports it."""
    global _requested
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    _requested = True
    if "litellm" in sys.modules:
        litellm_imported(sys.modules["litellm"])


def litellm_imported(litellm: Any) -> None:
    """Called by the modules that import litellm, once imported: make it quiet if :func:`quiet_libraries` was
    called (the debug banner and telemetry off); else change nothing (importing consensus-eval changes no
    global state)."""
    if _requested:
        litellm.suppress_debug_info = True
        litellm.telemetry = False

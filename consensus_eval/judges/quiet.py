"""What the command line sets in the libraries under the LLM judges, and a host application may.

Importing consensus-eval changes nothing global. The CLI calls :func:`quiet_libraries` before its
first judge is built; a program using the Python API calls it if it wants the same behaviour.
"""

from __future__ import annotations

import logging
import os

#: loggers whose lines would only repeat what the store records for every attempt (and could echo
#: request details)
LIBRARY_LOGGERS = ("instructor", "LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx")


def quiet_libraries() -> None:
    """Use litellm's bundled price map (no download at import), silence the libraries' loggers and
    litellm's debug banner and telemetry. Call it before litellm is first imported."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False

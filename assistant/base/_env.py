"""Process-wide privacy switches, applied before any heavy import.

Imported first by ``assistant/__init__.py`` so that every entry point (the
``drag`` script, ``python -m assistant``, the tests, the local teacher server
that inherits this environment) runs with them.  Libraries read these at import
time, so setting them later is too late.
"""

from __future__ import annotations

import os

# Forced, not defaulted: the app makes no connection except to the teacher.
OFFLINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",  # huggingface_hub: never fetch weights or configs
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "ORT_DISABLE_TELEMETRY": "1",  # onnxruntime phones home otherwise
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # keep stdout/stderr for the answer
    "TRANSFORMERS_VERBOSITY": "error",
}


def apply() -> None:
    os.environ.update(OFFLINE_ENV)


apply()

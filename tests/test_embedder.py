"""The embedder on ONNX Runtime, held to vectors sentence-transformers made
(tests/data/embedder_reference.npz, written by tests/make_embedder_reference.py)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from assistant.base.config import Settings
from assistant.base.errors import ModelError
from assistant.drag.ranking import rank_texts
from assistant.models import bertonnx, embedder
from assistant.models.embedder import OnnxEmbedder

REFERENCE = Path(__file__).parent / "data" / "embedder_reference.npz"


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder()


@pytest.fixture(scope="module")
def reference() -> tuple[list[str], np.ndarray]:
    with np.load(REFERENCE, allow_pickle=False) as data:
        return [str(s) for s in data["sentences"]], data["vectors"]


def test_vectors_match_sentence_transformers(
    onnx: OnnxEmbedder, reference: tuple[list[str], np.ndarray]
) -> None:
    sentences, expected = reference
    got = onnx.embed(sentences)
    assert got.shape == expected.shape and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosine = np.sum(got * expected, axis=1)
    worst = int(np.argmin(cosine))
    assert cosine.min() >= 0.999, f"{sentences[worst][:40]!r}: cosine {cosine[worst]:.5f}"


def test_a_vector_does_not_depend_on_its_batch(onnx: OnnxEmbedder) -> None:
    """Padding and the length-sorted batches must not change a sentence's vector."""
    short = "Which planet is closest to the Sun?"
    alone = onnx.embed([short])[0]
    batch = [f"filler sentence number {i} " * (i % 7 + 1) for i in range(70)]
    batch.insert(37, short)
    mixed = onnx.embed(batch)
    assert float(mixed[37] @ alone) >= 0.9999
    assert len(mixed) == 71


def test_ranking_with_onnx_equals_ranking_with_the_reference(
    onnx: OnnxEmbedder, reference: tuple[list[str], np.ndarray]
) -> None:
    sentences, expected = reference
    texts = sentences[3:16]

    class Stored:  # a fake embedder that answers with the stored reference vectors
        def embed(self, batch: list[str]) -> np.ndarray:
            return np.stack([expected[sentences.index(t)] for t in batch])

    question = sentences[3]
    assert [r.index for r in rank_texts(question, texts, onnx)] == [
        r.index for r in rank_texts(question, texts, Stored())
    ]


def test_only_the_cpu_provider_by_default(onnx: OnnxEmbedder) -> None:
    """Not Azure's, which connects out: the only connection is the teacher."""
    assert onnx._session.get_providers() == ["CPUExecutionProvider"]


def test_two_onnx_runtimes_installed_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.0")  # fake: both present
    with pytest.raises(ModelError, match="both onnxruntime and onnxruntime-gpu"):
        embedder.providers("cpu")


def test_cuda_without_a_cuda_runtime_is_a_clear_error() -> None:
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this machine's ONNX Runtime has CUDA")
    with pytest.raises(ModelError, match="install onnxruntime-gpu"):
        embedder.load(device="cuda")


def test_torch_backend_without_sentence_transformers_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    with pytest.raises(ModelError, match=r"drag-assistant\[torch\]"):
        embedder.load(backend="torch")


def test_settings_choose_the_backend() -> None:
    assert Settings().embedder.backend == "onnx"
    assert Settings().embedder.device == "cpu"


def test_not_a_bert_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    with pytest.raises(ModelError, match="only BERT"):
        bertonnx.build(tmp_path)


def test_a_broken_weights_file_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(b"\xff" * 16)
    with pytest.raises(ModelError, match="not a safetensors file"):
        bertonnx.read_safetensors(bad)


def test_the_default_install_does_not_import_torch() -> None:
    """Loading and using the embedder, with telemetry off before ONNX Runtime loads."""
    code = (
        "import os, sys\n"
        "from assistant.models.embedder import load\n"
        "load().embed(['x'])\n"
        "assert os.environ['ORT_DISABLE_TELEMETRY'] == '1'\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers')"
        " if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

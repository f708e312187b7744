"""Writes tests/data/embedder_reference.npz: all-MiniLM-L6-v2 vectors made by
sentence-transformers on torch, the reference the ONNX Runtime embedder is held to.

    pip install -e '.[torch]' && python tests/make_embedder_reference.py

Run once; the file is committed.  The sentences cover what the app embeds: questions,
evidence, triples, entity n-grams, placeholders, non-Latin text, and one longer than the
model's 256 tokens (truncated the same way by both).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from assistant.models.embedder import SentenceEmbedder

OUT = Path(__file__).parent / "data" / "embedder_reference.npz"

SENTENCES = [
    "",
    "a",
    "Hello world",
    "What causes the seasons on Earth?",
    "The tilt of Earth's axis causes the seasons.",
    "Earth | orbits | the Sun",
    "photosynthesis",
    "light-dependent reactions",
    "Which gas do plants take in during photosynthesis? A) oxygen B) carbon dioxide",
    "My colleague <PERSON_1> at <ORG_1> (a biotech company) asked about the contract.",
    "Tromsø is a city in Norway; São Paulo is in Brazil.",
    "Wie spät ist es in München?",
    "東京は日本の首都です。",
    "Ответ: 42.",
    "E = mc^2 relates energy and mass.",
    "The acceleration of an object is directly proportional to the net force acting on it "
    "and inversely proportional to its mass.",
    "   leading and trailing spaces   ",
    "UPPER CASE TEXT IS LOWER-CASED BY THE TOKENIZER",
    "emoji 🙂 and symbols © ™ ✓",
    "word " * 300,  # past 256 tokens: truncated
]


def main() -> None:
    vectors = SentenceEmbedder().embed(SENTENCES)
    OUT.parent.mkdir(exist_ok=True)
    np.savez_compressed(OUT, sentences=np.array(SENTENCES), vectors=vectors.astype(np.float32))
    print(f"wrote {OUT}: {vectors.shape}")


if __name__ == "__main__":
    main()

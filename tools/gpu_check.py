"""The student on a GPU build of llama.cpp, where a GPU machine is lent for minutes and the
real 1.1 GB model cannot travel there (packaging/gpu-check.sh runs this on that machine).

    python tools/gpu_check.py skeleton MODEL.gguf DIR   # here: MODEL's header and layout
    python tools/gpu_check.py random DIR OUT.gguf       # there: that layout, random weights
    python tools/gpu_check.py check OUT.gguf auto|off [RUNS] [MAX_TOKENS] > FIGURES
    python tools/gpu_check.py ratio GPU_FIGURES CPU_FIGURES

``random`` writes a file of the model's exact layout (header, tokenizer, tensor types and
offsets copied) with random weights, so its speed is the model's; the rows of the
end-of-turn tokens are zero (the output is tied to them), so a reply runs to MAX_TOKENS.
``check`` loads it through drag's own Student with ``gpu = "auto"`` or ``"off"`` and
times ``drag bench speed``'s prompt (bench/ on the Python path), each in
a process of its own (one that has asked for the GPU holds llama.cpp's GPU library, which
may take a CPU run's large batches), and prints whether drag offloaded it and its
timings, the last line a JSON of them; ``ratio`` sets two such runs side by side
(gguf-py is needed for ``skeleton`` only).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# Block size in bytes, and where its float16 scales sit, for the types of a Q4_K_M file.
BLOCKS: dict[str, tuple[int, tuple[int, ...]]] = {
    "Q4_K": (144, (0, 2)),
    "Q6_K": (210, (208,)),
    "F32": (4, ()),
}
STOPS = (151643, 151645)  # Qwen2.5's <|endoftext|> and <|im_end|>
VOCAB = 151936


def skeleton(model: Path, folder: Path) -> None:
    from gguf import GGUFReader

    reader = GGUFReader(str(model))
    tensors = [
        {
            "name": t.name,
            "type": t.tensor_type.name,
            "offset": int(t.data_offset) - reader.data_offset,
            "nbytes": int(t.n_bytes),
        }
        for t in reader.tensors
    ]
    folder.mkdir(parents=True, exist_ok=True)
    with model.open("rb") as fh:
        (folder / "head.bin").write_bytes(fh.read(reader.data_offset))
    layout = {"size": model.stat().st_size, "data_offset": reader.data_offset, "tensors": tensors}
    (folder / "layout.json").write_text(json.dumps(layout))


def random_model(folder: Path, out: Path) -> None:
    import numpy as np

    layout = json.loads((folder / "layout.json").read_text())
    rng = np.random.default_rng(0)
    data = np.zeros(layout["size"] - layout["data_offset"], dtype=np.uint8)
    scale = np.frombuffer(np.float16(0.002).tobytes(), dtype=np.uint8)
    for t in layout["tensors"]:
        size, scales = BLOCKS[t["type"]]
        start, n = t["offset"], t["nbytes"]
        if t["type"] == "F32":
            weights = rng.uniform(0.5, 1.5, n // 4).astype(np.float32)
            data[start : start + n] = weights.view(np.uint8)
            continue
        blocks = np.frombuffer(rng.bytes(n), dtype=np.uint8).reshape(-1, size).copy()
        for at in scales:  # random bytes could make an inf or NaN scale
            blocks[:, at : at + 2] = scale
        flat = blocks.reshape(-1)
        if t["name"] == "token_embd.weight":  # tied output: a zero row is never the top logit
            row = len(blocks) // VOCAB * size
            for token in STOPS:
                flat[token * row : (token + 1) * row] = 0
        data[start : start + n] = flat
    with out.open("wb") as fh:
        fh.write((folder / "head.bin").read_bytes())
        fh.write(data.tobytes())


def gpu_memory() -> str:
    try:
        got = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.used", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError as exc:
        return f"no nvidia-smi: {exc}"
    return got.stdout.strip() or got.stderr.strip()


def check(model: Path, gpu: str, runs: int = 3, max_tokens: int = 128) -> None:
    import llama_cpp
    from drag_bench.speed import prompt  # the prompt of drag bench speed's CPU figures

    from assistant.models import llamabuild
    from assistant.models.student import Student, gpu_offload_supported

    print("llama_supports_gpu_offload:", llama_cpp.llama_supports_gpu_offload())
    if gpu == "auto":  # asking loads the GPU library: the CPU run does not ask
        print("llamabuild.has_gpu:", llamabuild.has_gpu())
        print("student.gpu_offload_supported:", gpu_offload_supported())
    print("GPU memory before:", gpu_memory())
    started = time.monotonic()
    student = Student(model, n_ctx=4096, gpu=gpu, status=lambda m: print("  status:", m))
    print(
        f"gpu={gpu}: loaded in {time.monotonic() - started:.1f} s, on_gpu={student.on_gpu},"
        f" variant {student.build.name}; GPU memory {gpu_memory()}"
    )
    rows: list[tuple[float, float]] = []
    for i in range(runs + 1):  # the first warms up and is not counted
        g: Any = student.chat(prompt(i), max_tokens=max_tokens)
        if i:
            rows.append((g.prompt_seconds, g.tokens_per_second))
        print(
            f"  run {i}: {g.prompt_tokens} prompt tokens in {g.prompt_seconds:.3f} s,"
            f" {g.completion_tokens} tokens at {g.tokens_per_second:.1f} tok/s"
        )
    student.close()
    figures = {
        "gpu": gpu,
        "on_gpu": student.on_gpu,
        "runs": len(rows),
        "first_token_p50": statistics.median(r[0] for r in rows),
        "decode_p50": statistics.median(r[1] for r in rows),
    }
    print(json.dumps(figures))


def ratio(on: Path, off: Path) -> None:
    gpu, cpu = (json.loads(p.read_text().strip().splitlines()[-1]) for p in (on, off))
    for f in (gpu, cpu):
        print(
            f"gpu={f['gpu']} (on_gpu {f['on_gpu']}): first token p50 {f['first_token_p50']:.3f} s,"
            f" decode p50 {f['decode_p50']:.1f} tok/s over {f['runs']} runs"
        )
    print(
        f"ratio: first token CPU/GPU {cpu['first_token_p50'] / gpu['first_token_p50']:.2f},"
        f" decode GPU/CPU {gpu['decode_p50'] / cpu['decode_p50']:.2f}"
    )


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "skeleton":
        skeleton(Path(argv[1]), Path(argv[2]))
    elif len(argv) == 3 and argv[0] == "random":
        random_model(Path(argv[1]), Path(argv[2]))
    elif 3 <= len(argv) <= 5 and argv[0] == "check" and argv[2] in ("auto", "off"):
        check(Path(argv[1]), argv[2], *(int(a) for a in argv[3:]))
    elif len(argv) == 3 and argv[0] == "ratio":
        ratio(Path(argv[1]), Path(argv[2]))
    else:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

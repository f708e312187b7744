"""llama.cpp builds side by side: the same student, prompt and threads, run by each
Python environment named (each with its own llama-cpp-python build), in one run.

    drag bench builds --python .venv/bin/python --python /tmp/native/bin/python --runs 5

Each round runs ``drag bench speed --runs 1`` once in every environment, one after the
other, in a fresh process each (the model is loaded anew: the page cache holds it after
the first), and the order of the builds turns each round (A B, B A, …) so that a drift
of the machine's speed falls on both.  Figures are medians over the rounds; × is
against the first build named.  Which CPU code each build ran is printed beside it: the
variant a portable build chose (``assistant/models/llamabuild.py``) and its instruction sets.
Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from drag_bench import arguments

KEYS = ("load_s", "first_token_s", "prefill_tok_s", "decode_tok_s")


def one_run(python: str, model: str, decode_tokens: int, threads: int) -> dict[str, Any]:
    """``drag bench speed --runs 1`` in that environment: its figures and its build."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "speed.json"
        command = [python, "-m", "drag_bench.speed", "--students", model, "--runs", "1"]
        command += ["--decode-tokens", str(decode_tokens), "--threads", str(threads)]
        proc = subprocess.run(
            [*command, "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{python}: exit {proc.returncode}: {last}")
        (row,) = json.loads(out.read_text("utf-8"))
    return dict(row)


def render(names: Sequence[str], rows: dict[str, list[dict[str, Any]]]) -> str:
    medians = {n: {k: statistics.median(r[k] for r in rows[n]) for k in KEYS} for n in names}
    base = medians[names[0]]
    lines = [
        "| build | CPU code | load s | first token s | prefill tok/s | decode tok/s "
        "| prefill × | decode × |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        m, first = medians[name], rows[name][0]
        cpu = f"{first.get('cpu', '?')}: {first.get('features', '?')}"
        pre = m["prefill_tok_s"] / base["prefill_tok_s"] if base["prefill_tok_s"] else 0.0
        dec = m["decode_tok_s"] / base["decode_tok_s"] if base["decode_tok_s"] else 0.0
        lines.append(
            f"| {name} | {cpu} | {m['load_s']:.2f} | {m['first_token_s']:.2f} "
            f"| {m['prefill_tok_s']:.1f} | {m['decode_tok_s']:.1f} | {pre:.3f} | {dec:.3f} |"
        )
    first_rows = rows[names[0]]
    lines.append("")
    lines.append(
        f"Medians of {len(first_rows)} rounds, builds alternating; model "
        f"{first_rows[0]['model']}, {first_rows[0]['prompt_tokens']} prompt tokens; "
        f"× = against {names[0]}."
    )
    for name in names:
        raw = ", ".join(f"{r['prefill_tok_s']:.1f}/{r['decode_tok_s']:.1f}" for r in rows[name])
        lines.append(f"{name} prefill/decode per round: {raw}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments("builds", __doc__)
    parser.add_argument(
        "--python", action="append", required=True, help="an environment's python (2 or more)"
    )
    parser.add_argument("--student", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--runs", type=int, default=5, help="rounds")
    parser.add_argument("--decode-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=0, help="0 = every CPU")
    parser.add_argument("--json", type=Path, help="also write every round's figures here")
    args = parser.parse_args(argv)
    names = list(dict.fromkeys(args.python))
    if len(names) < 2 or args.runs < 1:
        print("bench: error: two or more different --python, --runs >= 1", file=sys.stderr)
        return 2
    rows: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    try:
        for run in range(args.runs):
            for name in names if run % 2 == 0 else names[::-1]:
                row = one_run(name, args.student, args.decode_tokens, args.threads)
                rows[name].append(row)
                print(f"round {run + 1} {name}: {row}", file=sys.stderr, flush=True)
    except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 1
    print(render(names, rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

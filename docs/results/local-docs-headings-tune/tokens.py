"""The student's tokens of a passage's heading, whole path against its time (issue 51).

    python3 tokens.py MODEL.gguf > tokens.txt
"""

from __future__ import annotations

import sys

from llama_cpp import Llama

HEADINGS = {
    "whole path": "[/work/shared/data/lihuaworld/LiHua-World/week40/20261005_1005.txt, "
    "2026-10-05 10:05]\n",
    "time": "[2026-10-05 10:05]\n",
}

model = Llama(sys.argv[1], vocab_only=True, verbose=False)
for name, heading in HEADINGS.items():
    print(f"{name}: {len(model.tokenize(heading.encode(), add_bos=False))} tokens")

"""The student's tokens of the files answer's fixed head (issue 51): its prompt up to
the first excerpt, as the model's chat template writes it (ChatML for the 1.5B).

    python3 headtokens.py MODEL.gguf > headtokens.txt
"""

from __future__ import annotations

import sys

from llama_cpp import Llama

from assistant.drag import answer

system, user = answer.files_head()
prompt = f"<|im_start|>system\n{system['content']}<|im_end|>\n<|im_start|>user\n{user['content']}"
head = prompt[: prompt.index(answer.FILES_HEAD_MARK)]
model = Llama(sys.argv[1], vocab_only=True, verbose=False)
print(
    f"files answer's head: {len(model.tokenize(head.encode(), add_bos=False, special=True))} tokens"
)

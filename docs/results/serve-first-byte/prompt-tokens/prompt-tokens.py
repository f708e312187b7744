"""The first-byte run's student prompts split: the system prompt's tokens (read once, as
the student loads) and the rest (the question's turn), with the seconds before the first
token of each.  python prompt-tokens.py MODEL.gguf first-byte.json"""

import json
import statistics
import sys

import llama_cpp

from assistant.drag import answer

llm = llama_cpp.Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
system = len(llm.tokenize(answer.SYSTEM.encode(), add_bos=False, special=True))
run = json.load(open(sys.argv[2]))["student_prompt"]
rest = [t - system for t in run["tokens"]]
print("system prompt tokens", system)
print("the question's tokens", rest, "median", statistics.median(rest))
print("seconds", [round(s, 2) for s in run["all"]])
print("tokens a second", [round(t / s) for t, s in zip(rest, run["all"], strict=True)])
print("median tokens a second", statistics.median(t / s for t, s in zip(rest, run["all"], strict=True)))

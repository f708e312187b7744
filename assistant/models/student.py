"""The local student model: llama.cpp through llama-cpp-python, in this process."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from assistant.base import calloff
from assistant.base.errors import ModelError
from assistant.models.reading import Chosen, Generation, LastRow, Probe, log_normaliser

# Passes of Student.inert: a space never joins two pieces into a token, so one does;
# the rest guard a vocabulary whose control tokens hold spaces.
_INERT_PASSES = 3
Messages = Sequence[dict[str, str]]


def default_threads() -> int:
    """All CPUs this process may use (llama-cpp-python's own default is half of them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def quiet_llama_cpp() -> None:
    """llama.cpp's own log: errors only (Llama(verbose=True) turned it up)."""
    from llama_cpp._logger import set_verbose

    set_verbose(False)


class _LoadLog(io.TextIOBase):
    """``sys.stderr`` while a thread loads a model: what that thread writes (llama.cpp's
    log) is kept for an error message; what other threads write goes on to ``through``
    (a status line printed while the model loads in the background)."""

    def __init__(self, through: TextIO) -> None:
        self.through = through
        self.kept = io.StringIO()
        self._loader = threading.get_ident()

    def write(self, text: str) -> int:
        if threading.get_ident() == self._loader:
            return self.kept.write(text)
        return self.through.write(text)

    def flush(self) -> None:
        self.through.flush()

    def isatty(self) -> bool:
        return self.through.isatty()

    def fileno(self) -> int:
        return self.through.fileno()


def gpu_offload_supported() -> bool:
    """True when this llama.cpp build can offload layers to a GPU (CUDA, Metal, Vulkan...)."""
    import llama_cpp

    from assistant.models import llamabuild

    found = llamabuild.has_gpu()  # a portable build's GPU backends are libraries of their own
    return bool(llama_cpp.llama_supports_gpu_offload()) if found is None else found


class Student:
    def __init__(
        self,
        path: Path,
        *,
        n_ctx: int = 4096,
        gpu: str = "auto",
        threads: int = 0,
        seed: int = 0,
        status: Callable[[str], None] = lambda _message: None,
        lookup: bool = False,
        flash_attn: bool = False,
    ) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as exc:  # pragma: no cover - a broken install
            raise ModelError(f"llama-cpp-python is not installed: {exc}") from None
        from assistant.models import llamacheck

        self.path = path
        self._lock = threading.Lock()
        self._grammars: dict[tuple[str, ...], Any] = {}  # per set of choices (see chat)
        self._chat_formatter: Any = None
        self.gpu_layers = -1 if gpu == "auto" and gpu_offload_supported() else 0
        # llama.cpp runs in this process: a build that dies on this CPU would take the app
        # with it, so a child process computes with it first (once per build and model).
        self.build = llamacheck.prepare(path, gpu_layers=self.gpu_layers, status=status)
        kwargs: dict[str, Any] = {
            "model_path": str(path),
            "n_ctx": n_ctx,
            "n_gpu_layers": self.gpu_layers,
            "seed": seed,
            "n_threads": threads or default_threads(),
            "n_threads_batch": threads or default_threads(),
            "flash_attn": flash_attn,
            # verbose=False would make llama-cpp-python point file descriptors 1 and 2 at
            # /dev/null for the whole process while it loads: the terminal app, drawing on
            # them from another thread, would lose its output and its size.  Loaded
            # verbose, its messages go to a Python stream here instead.
            "verbose": True,
        }
        log = _LoadLog(sys.stderr)
        sys.stderr = log
        try:
            self._llm = Llama(**kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            last = log.kept.getvalue().strip().splitlines()[-1:]
            why = f" ({last[0]})" if last else ""
            raise ModelError(f"llama.cpp could not load {path}: {exc}{why}") from None
        finally:
            if sys.stderr is log:
                sys.stderr = log.through
            quiet_llama_cpp()
        self._llm.verbose = False  # no prints while answering
        self.n_ctx = n_ctx
        self.flash_attn = flash_attn
        # ``lookup``: greedy replies without a grammar are decoded by drafting from the
        # prompt (:mod:`assistant.models.lookup`): the privacy reader's, whose values
        # are copied from the question.
        self.lookup = lookup
        self._lookup_ok: bool | None = None

    def close(self) -> None:
        """Free the model now (llama-cpp-python's own finaliser fails at interpreter exit)."""
        llm = self.__dict__.pop("_llm", None)
        if llm is not None:
            llm.close()

    @property
    def on_gpu(self) -> bool:
        return self.gpu_layers != 0

    def _grammar(self, choices: tuple[str, ...]) -> Any:
        """A GBNF grammar whose only sentences are ``choices`` (built once per set)."""
        if choices not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            rule = " | ".join(json.dumps(c) for c in choices)  # GBNF literals: JSON escapes
            self._grammars[choices] = LlamaGrammar.from_string(f"root ::= {rule}", verbose=False)
        return self._grammars[choices]

    def _schema_grammar(self, schema: str) -> Any:
        """A GBNF grammar whose only sentences are JSON documents of ``schema`` (a JSON
        text; built once per schema by llama.cpp's own converter)."""
        key = ("\0schema", schema)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            self._grammars[key] = LlamaGrammar.from_json_schema(schema, verbose=False)
        return self._grammars[key]

    def forget(self) -> None:
        """Evaluate the next prompt from its first token.  llama.cpp reuses the part of a
        prompt it has just seen (a K sweep pays only for the new statements), but a prompt
        split differently into batches can round differently and flip a close answer: a
        benchmark forgets before each question, so a question's first answer does not
        depend on the question before it."""
        with self._lock:
            self._llm.reset()  # type: ignore[no-untyped-call]

    def prime(self, system: str) -> None:
        """Read ahead the head that every answer's prompt starts with: ``system`` and the
        opening of the user's turn.  llama.cpp keeps what it has read and reads a prompt
        that starts the same way only from where it differs, so the first question pays
        for its own tokens only.  The runtime calls this as the student loads, while the
        question is still being checked."""
        self.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": ""}],
            max_tokens=1,
        )

    def keep_head(self, messages: Messages, mark: str, folder: Path | None, tag: str = "") -> str:
        """Hold read the head of ``messages``' prompt before ``mark`` (the reader's rules
        and examples, the files answer's rules), its state kept in ``folder`` across
        processes under ``tag`` (:mod:`assistant.models.prefixstate`): "held", "loaded",
        "saved", "read", or "none" where the prompt does not start with the head, or
        where holding it failed.  Only a speed-up: another prompt format or a template
        that refuses leaves what llama.cpp read as it was; a failure once holding began
        (llama.cpp refusing a state) leaves nothing read; either way the head is read
        with the question, as before."""
        from assistant.models import prefixstate

        with self._lock:
            try:
                head = self._head_tokens(messages, mark)
            except Exception:  # nothing read yet: what llama.cpp holds stays
                return "none"
            if head is None:
                return "none"
            try:
                return prefixstate.keep(
                    self._llm,
                    self.path,
                    head,
                    gpu_layers=self.gpu_layers,
                    n_ctx=self.n_ctx,
                    folder=folder,
                    tag=tag,
                    flash_attn=self.flash_attn,
                )
            except Exception:
                self._llm.reset()  # type: ignore[no-untyped-call]
                return "none"

    def _head_tokens(self, messages: Messages, mark: str) -> list[int] | None:
        """The tokens of the prompt's head before ``mark`` as the whole prompt has them;
        None where there is no such head (no mark, or a head that would not fit)."""
        formatted = self._formatter()(messages=self._inert_messages(messages))
        cut = formatted.prompt.find(mark)
        if cut < 0:
            return None
        head = self._template_tokens(formatted.prompt[:cut], formatted)
        whole = self._template_tokens(formatted.prompt, formatted)
        # Its end may join the mark's start in a token (line breaks, a bracket): the
        # head held is the tokens both start with, at most two short of it.
        shared = self._llm.longest_token_prefix(head, whole)
        if shared < len(head) - 2 or shared + 64 >= self.n_ctx:
            return None
        return whole[:shared]

    def _template_tokens(self, text: str, formatted: Any) -> list[int]:
        """The tokens of ``text``, a chat template's prompt (or its head) as the template
        ``formatted`` it: its special tokens live, a BOS where the template wrote none."""
        data = text.encode("utf-8")
        return self._llm.tokenize(data, add_bos=not formatted.added_special, special=True)

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def inert(self, text: str) -> str:
        """``text`` without the model's control tokens written as text (``<|im_end|>``,
        ``<|im_start|>``): the chat template is read with them live, so a teacher's
        statement (or a pasted question) holding one would end its turn and open another
        (a forged system prompt).  Each becomes a space, so the text around it cannot
        join into a new one (``<|im_<|im_end|>end|>``); text without any is returned as
        it is (a lone surrogate, which no tokenizer reads, as U+FFFD)."""
        import llama_cpp

        if any("\ud800" <= ch <= "\udfff" for ch in text):
            text = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
        vocab = llama_cpp.llama_model_get_vocab(self._llm.model)
        for _ in range(_INERT_PASSES):
            data = text.encode("utf-8")
            live = self._llm.tokenize(data, add_bos=False, special=True)
            if live == self._llm.tokenize(data, add_bos=False, special=False):
                return text
            control = {
                llama_cpp.llama_vocab_get_text(vocab, t).decode("utf-8", "replace")
                for t in set(live)
                if llama_cpp.llama_vocab_get_attr(vocab, t) & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
            }
            if not control:  # they differ in another way (a user-defined token): as is
                return text
            for token in sorted(control, key=len, reverse=True):
                text = text.replace(token, " ")
        raise ModelError(
            "the text holds the model's control tokens nested too deep to read it as text"
        )

    def _inert_messages(self, messages: Sequence[dict[str, str]]) -> list[dict[str, str]]:
        return [{**m, "content": self.inert(m["content"])} for m in messages]

    def _formatter(self) -> Any:
        """The model's own chat template (what ``create_chat_completion`` uses); a
        ModelError where chat completion formats the prompt another way."""
        if self._llm.chat_handler is not None or self._llm.chat_format != "chat_template.default":
            raise ModelError(
                f"{self.path.name} is prompted in the {self._llm.chat_format} format, which "
                "the gate cannot read"
            )
        if self._chat_formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            template = self._llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise ModelError(f"{self.path.name} has no chat template in its metadata")
            model: Any = self._llm._model
            eos, bos = self._llm.token_eos(), self._llm.token_bos()
            self._chat_formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=model.token_get_text(eos) if eos != -1 else "",
                bos_token=model.token_get_text(bos) if bos != -1 else "",
                stop_token_ids=[eos],
            )
        return self._chat_formatter

    def probe(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int,
        choices: Sequence[str] = (),
    ) -> Probe:
        """The first ``max_tokens`` tokens of the greedy reply to ``messages`` with the
        log-probability of each (and of each of ``choices`` at the first step).

        llama.cpp reuses the part of the prompt it has just read, so two probes that share
        the system prompt and the question pay for that once."""
        import llama_cpp

        with self._lock:
            try:
                formatted = self._formatter()(messages=self._inert_messages(messages))
            except ModelError:
                raise
            except Exception as exc:  # the model's own template (Jinja) refused the messages
                raise ModelError(f"{self.path.name}'s chat template: {exc}") from None
            tokens = self._template_tokens(formatted.prompt, formatted)
            if len(tokens) + max_tokens + 1 >= self.n_ctx:
                raise ModelError(
                    f"the prompt needs {len(tokens)} tokens but the student's context is "
                    f"{self.n_ctx}; lower pipeline.k or raise student.n_ctx"
                )
            whole = [self._llm.tokenize(c.encode("utf-8"), add_bos=False) for c in choices]
            firsts = [w[:1] for w in whole]
            distinct = len({tuple(f) for f in firsts}) == len(firsts) and all(firsts)
            # Choices of one token each: the first token is the whole reply, read once.
            single = distinct and all(len(w) == 1 for w in whole)
            last = LastRow()
            vocab = llama_cpp.llama_model_get_vocab(self._llm.model)
            started = time.perf_counter()
            written: list[int] = []
            logprobs: list[float] = []
            by_choice: dict[str, float] = {}
            steps = self._llm.generate(
                tokens,
                temp=0.0,
                repeat_penalty=1.0,
                logits_processor=llama_cpp.LogitsProcessorList([last]),
                grammar=self._grammar(tuple(choices)) if choices else None,
            )
            ended = False
            for token in steps:
                calloff.check()
                if not written and choices and distinct:
                    import numpy as np

                    picked = np.array([last.row[f[0]] for f in firsts])
                    norm = log_normaliser(picked)
                    by_choice = {c: float(v) - norm for c, v in zip(choices, picked, strict=True)}
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    ended = True
                    break
                written.append(token)
                logprobs.append(float(last.row[token]))
                if len(written) >= max_tokens or (choices and single):
                    break
            steps.close()
            text = self._llm.detokenize(written).decode("utf-8", errors="replace")
            return Probe(
                text=text.strip(),
                token_logprobs=tuple(logprobs),
                choice_logprobs=by_choice,
                prompt_tokens=len(tokens),
                seconds=time.perf_counter() - started,
                tokens=tuple(written),
                ended=ended,
            )

    def answer_after(
        self,
        probe: Probe,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int,
        on_text: Callable[[str], None] | None = None,
    ) -> Generation | None:
        """The greedy reply to ``messages`` that ``probe`` (a reading of the same prompt)
        began, written on from where it stopped: llama.cpp still holds the prompt and the
        probe's tokens, so they are not computed again.  The same text as :meth:`chat` at
        temperature 0.  None, before anything is written, where the probe's tokens are not
        whole characters (then the caller answers with :meth:`chat`)."""
        on_text = calloff.checking(on_text)  # the app closed: the reply stops
        with self._lock:
            formatted = self._formatter()(messages=self._inert_messages(messages))
            tokens = self._template_tokens(formatted.prompt, formatted)
            try:
                head = self._llm.detokenize(list(probe.tokens)).decode("utf-8")
            except UnicodeDecodeError:
                return None
            pieces, count, finish = [head], len(probe.tokens), None
            if on_text is not None and head:
                on_text(head)
            started = time.perf_counter()  # what is decoded from here, the probe's excluded
            left = min(max_tokens, self.n_ctx - len(tokens) - 16) - count
            if not probe.ended and left > 0:
                stream: Any = self._llm.create_completion(
                    prompt=[*tokens, *probe.tokens],
                    max_tokens=left,
                    temperature=0.0,
                    stream=True,
                    stop=formatted.stop,
                )
                for chunk in stream:
                    choice = chunk["choices"][0]
                    finish = choice.get("finish_reason") or finish
                    if piece := choice.get("text"):
                        count += 1
                        pieces.append(piece)
                        if on_text is not None:
                            on_text(piece)
            elif not probe.ended:
                finish = "length"
            ended = time.perf_counter()
            return Generation(
                text="".join(pieces).strip(),
                prompt_tokens=sum(self.count_tokens(m["content"]) for m in messages),  # as chat
                completion_tokens=count,
                prompt_seconds=probe.seconds,
                decode_seconds=ended - started if count > len(probe.tokens) else 0.0,
                finished=finish != "length",
                decoded=count - len(probe.tokens),
            )

    def as_generation(self, probe: Probe, messages: Sequence[dict[str, str]]) -> Generation:
        """A probe's reply as the answer (a choice the probe read to its end: reading it
        again in another batch could round a close call the other way)."""
        return Generation(
            text=probe.text,
            prompt_tokens=sum(self.count_tokens(m["content"]) for m in messages),
            completion_tokens=len(probe.token_logprobs),
            prompt_seconds=probe.seconds,
            decode_seconds=0.0,
        )

    def read_choice(self, messages: Sequence[dict[str, str]], choices: Sequence[str]) -> Generation:
        """The reply limited to ``choices``, read the way the gate reads one: the likeliest
        choice at the first step (what a grammar allowing only them makes greedily)."""
        return self.as_generation(self.probe(messages, max_tokens=2, choices=choices), messages)

    def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 384,
        temperature: float = 0.0,
        on_text: Callable[[str], None] | None = None,
        choices: Sequence[str] = (),
        schema: dict[str, Any] | None = None,
        logprobs: bool = False,
        draft: bool = False,
    ) -> Generation:
        """Generate a reply, streaming pieces to ``on_text`` as they come (one at a time).

        ``choices``: the reply is exactly one of these strings (a grammar enforces it).
        ``schema``: the reply is a JSON document of this JSON schema (a grammar enforces
        it, up to ``max_tokens``: a reply cut there is ``Generation.finished`` False).
        ``logprobs``: how likely the model found each token it wrote
        (``Generation.token_logprobs``).  ``draft``: a greedy reply without a grammar is
        decoded by drafting from the prompt (:mod:`assistant.models.lookup`), as every
        such reply of a student made with ``lookup`` is."""
        on_text = calloff.checking(on_text)  # the app closed: the reply stops
        grammar = None
        if schema is not None:
            grammar = self._schema_grammar(json.dumps(schema, sort_keys=True))
        elif choices:
            grammar = self._grammar(tuple(choices))
        with self._lock:
            drafted = (self.lookup or draft) and grammar is None and temperature == 0.0
            if drafted and self.can_draft():
                return self._chat_lookup(
                    self._inert_messages(messages), max_tokens, on_text, logprobs
                )
            chosen = Chosen() if logprobs else None
            return self._chat(
                self._inert_messages(messages), max_tokens, temperature, on_text, grammar, chosen
            )

    def can_draft(self) -> bool:
        """Whether this model's replies can be decoded by :mod:`lookup`: prompted by its
        own chat template (read here as :meth:`_chat` reads it), and one whose context
        can take guessed tokens back (not a recurrent or hybrid model)."""
        if self._lookup_ok is None:
            try:
                self._formatter()
                self._lookup_ok = not (self._llm._is_recurrent or self._llm._is_hybrid)
            except Exception:  # another prompt format: decoded as before
                self._lookup_ok = False
        return self._lookup_ok

    def _chat_lookup(
        self,
        messages: Sequence[dict[str, str]],
        max_tokens: int,
        on_text: Callable[[str], None] | None,
        logprobs: bool = False,
    ) -> Generation:
        """:meth:`_chat` at temperature 0, decoded by :func:`lookup.greedy` (the reply
        ends at the model's end-of-generation token, which is its template's stop)."""
        from assistant.models import lookup

        formatted = self._formatter()(messages=messages)
        prompt = self._template_tokens(formatted.prompt, formatted)
        if len(prompt) + 16 >= self.n_ctx:
            raise ModelError(
                f"the prompt needs about {len(prompt)} tokens but the model's context is "
                f"{self.n_ctx}; raise student.n_ctx"
            )
        started = time.perf_counter()
        text, decoded = lookup.text_reply(
            self._llm,
            prompt,
            max_tokens=min(max_tokens, self.n_ctx - len(prompt) - 16),
            on_text=on_text,
            clock=time.perf_counter,
            logprobs=logprobs,
        )
        ended = time.perf_counter()
        first = started + decoded.prompt_seconds
        return Generation(
            text=text.strip(),
            prompt_tokens=sum(self.count_tokens(m["content"]) for m in messages),  # as _chat
            completion_tokens=len(decoded.tokens),
            prompt_seconds=decoded.prompt_seconds,
            decode_seconds=ended - first,
            finished=decoded.finished,
            token_logprobs=tuple(decoded.logprobs),
        )

    def _chat(
        self,
        messages: Sequence[dict[str, str]],
        max_tokens: int,
        temperature: float,
        on_text: Callable[[str], None] | None,
        grammar: Any = None,
        chosen: Chosen | None = None,
    ) -> Generation:
        import llama_cpp

        prompt_tokens = sum(self.count_tokens(m["content"]) for m in messages)
        if prompt_tokens + 16 >= self.n_ctx:
            raise ModelError(
                f"the prompt needs about {prompt_tokens} tokens but the student's context is "
                f"{self.n_ctx}; lower pipeline.k or raise student.n_ctx"
            )
        max_tokens = min(max_tokens, self.n_ctx - prompt_tokens - 16)
        started = time.perf_counter()
        first: float | None = None
        pieces: list[str] = []
        count = 0
        stream = self._llm.create_chat_completion(
            messages=[dict(m) for m in messages],  # type: ignore[misc]
            max_tokens=max_tokens,
            temperature=temperature,
            stream=True,
            grammar=grammar,
            logits_processor=llama_cpp.LogitsProcessorList([chosen]) if chosen else None,
        )
        finish = None
        for chunk in stream:
            choice: Any = chunk["choices"][0]  # type: ignore[index]
            if isinstance(choice, dict) and choice.get("finish_reason"):
                finish = choice["finish_reason"]
            delta = choice.get("delta") if isinstance(choice, dict) else None
            piece = delta.get("content") if isinstance(delta, dict) else None
            if not piece:
                continue
            count += 1
            if first is None:
                first = time.perf_counter()
            pieces.append(piece)
            if on_text is not None:
                on_text(piece)
        ended = time.perf_counter()
        first = first or ended
        return Generation(
            text="".join(pieces).strip(),
            prompt_tokens=prompt_tokens,
            completion_tokens=count,
            prompt_seconds=first - started,
            decode_seconds=ended - first,
            finished=finish != "length",
            token_logprobs=tuple(chosen.logprobs) if chosen else (),
        )

"""`drag ask` and `drag chat`: a thin skin over assistant.core.pipeline."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from assistant.base import errors, safetext, signals
from assistant.cli.common import (
    chat_line,
    echo,
    flags,
    gate_option,
    interactive_stderr,
    k_option,
    kept,
    mode_option,
    n_option,
    question_of,
    secho,
    settings_of,
    status_printer,
    to_json,
    with_cache_options,
    with_model_options,
)
from assistant.cli.review import ask_in_terminal, can_ask, review_options
from assistant.cli.root import cli

if TYPE_CHECKING:
    from assistant.base.config import Settings
    from assistant.core.session import Session


def _source_line(result: Any) -> str:
    """Where the student's context came from, with provenance."""
    p = result.provenance
    uploads = ", ".join(f"#{u}" for u in p.get("uploads") or []) or "none recorded"
    if result.source == "cache":
        how = p.get("how", "")
        detail = f"{how}, score {p.get('score', 0):.2f}"
        return f"Context: from the local cache ({detail}; from uploads {uploads}); nothing sent"
    if result.source == "teacher":
        return f"Context: from the teacher now (ledger uploads {uploads})"
    if result.source == "files":
        unread = "; the answer is not in them" if result.held_back else ""
        return f"Context: from your files ({p.get('method', '')}{unread}); nothing sent"
    return "Context: none (the student alone); nothing sent"


def _format_result(result: Any, streamed: bool) -> str:
    lines = [] if streamed else [result.answer]
    if result.passages:
        lines += ["", "Sources (your files, best first):"]
        cut = "cut" in result.prompt_versions  # the messages read, where not whole
        for p in result.passages:
            lines.append(f"{p.rank:>3}. {p.label}")
            lines += [f"       {safetext.one_line(m)}" for m in p.text.splitlines() if cut]
    used_e, used_t = result.used_evidence, result.used_triples
    if used_e:
        lines += [
            "",
            f"Evidence{'' if result.context_used else ' offered, not used'} "
            f"(top {len(used_e)} of {len(result.evidence)}; "
            "fused score, cosine, teacher rank):",
        ]
        lines += [
            f"{e.rank:>3}. [{e.score:.4f} cos {e.similarity:+.2f} t#{e.teacher_rank}] {e.text}"
            for e in used_e
        ]
    if used_t:
        lines += [
            "",
            f"Triples{'' if result.context_used else ' offered, not used'} "
            f"(top {len(used_t)} of {len(result.triples)}; fused score, cosine):",
        ]
        lines += [
            f"{t.rank:>3}. [{t.score:.4f} cos {t.similarity:+.2f}] "
            f"({t.entity1}; {t.entity2}) {t.relation}"
            for t in used_t
        ]
    if result.privacy:
        counts = result.privacy.get("entities") or {}
        detected = ", ".join(f"{k} ×{v}" for k, v in sorted(counts.items())) or "no personal data"
        what = "Sent to the teacher" if result.source == "teacher" else "Sanitized (not sent)"
        lines += ["", f"{what} ({detected} detected): {result.privacy['sent_question']}"]
    lines += ["", _source_line(result)]
    if result.gate:
        from assistant.drag import gate

        lines.append(f"Gate: {gate.describe(result.gate)}")
    lines += [f"warning: {w}" for w in result.warnings]
    s, te, tm = result.student, result.teacher, result.timings
    summary = []
    if te:
        summary.append(
            f"teacher: {len(te['calls'])} calls, "
            f"{te['prompt_tokens']}+{te['completion_tokens']} tokens"
        )
    if s:  # nothing when the student wrote nothing
        summary.append(
            f"student: {s['completion_tokens']} tokens at {s['tokens_per_second']:.1f} tok/s"
            f" ({'GPU' if s['gpu_offload'] else 'CPU'})"
        )
    summary.append(f"{tm.get('total', 0):.1f} s")
    lines += ["", " · ".join(summary)]
    return "\n".join(lines)


@cli.command()
@click.argument("question", nargs=-1)
@mode_option
@gate_option
@k_option
@n_option
@with_model_options
@with_cache_options
@click.option("--review", is_flag=True, help="Show what would be sent and ask first.")
@click.option("--yes", "-y", is_flag=True, help="Send without the review step.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole record as JSON.")
@click.option(
    "--files",
    "from_files",
    is_flag=True,
    help="Answer from your indexed files (drag index); nothing is sent.",
)
@click.pass_context
@signals.ended_as_interrupted  # `timeout`, `kill`: the question is kept, as for Ctrl+C
def ask(
    ctx: click.Context,
    /,
    question: tuple[str, ...],
    as_json: bool,
    review: bool,
    yes: bool,
    from_files: bool,
    **kw: Any,
) -> None:
    """Ask one QUESTION (or read it from standard input; "-" forces that; "-" before the
    words: the piped text, then the words, as in `git diff | drag ask - "why?"`)."""
    from assistant.serve import client  # the models, store and pipeline: only in-process

    chosen = flags(**kw)
    settings = settings_of(ctx, chosen)
    text = question_of(question)
    if not text.strip():
        raise errors.InputError(
            "the question is empty: type a question, or pipe one on standard input"
        )
    if review and yes:  # a review asked for is never skipped: nothing is sent
        why = "--review shows what would be sent and asks, --yes sends without asking: choose one"
        raise kept(text, errors.InputError(why))
    stream = not as_json and sys.stdout.isatty()
    on_text = (lambda piece: echo(piece, nl=False)) if stream else None
    try:
        # A running drag serve has the models loaded: it answers (the review, where one
        # is needed, is shown here; your files are read in-process).
        served = None
        if not from_files:
            served = client.ask(
                ctx.obj["settings"], text, chosen, yes=yes, on_text=on_text,
                review=ask_in_terminal if can_ask() else None, always=review,
            )  # fmt: skip
        if served is not None:
            if stream:
                echo()
            echo(to_json(served.to_dict()) if as_json else _format_result(served, stream))
            return
    except (errors.DragError, KeyboardInterrupt) as exc:
        raise kept(text, exc) from None
    from assistant.core import localfiles, pipeline
    from assistant.core.session import Session

    try:
        with Session(settings, status=status_printer(interactive_stderr())) as rt:
            tidy(rt)
            if from_files:
                result = localfiles.ask_files(rt, text, k=kw.get("k"), on_text=on_text)
                if stream:
                    echo()
            else:
                result = pipeline.ask(
                    rt,
                    text,
                    on_text=on_text,
                    progress=_end_streamed_line if stream else None,
                    **review_options(review, yes),
                )
    except (errors.DragError, KeyboardInterrupt) as exc:
        raise kept(text, exc) from None
    if as_json:
        echo(to_json(result.to_dict()))
    else:
        echo(_format_result(result, streamed=stream))


def tidy(rt: Session) -> None:
    """The keeping settings, where the session starts; a failure is a warning: the
    question is still asked."""
    try:
        rt.tidy()
    except errors.StoreError as exc:
        secho(f"drag: warning: the keeping settings were not applied: {exc}", err=True)


def _end_streamed_line(stage: str, _result: Any) -> None:
    """The streamed answer's line ends as soon as it is written, before any status line
    about what follows (the graph built for the cache after the answer)."""
    if stage == "answered":
        echo()


@cli.command()
@mode_option
@gate_option
@k_option
@n_option
@with_model_options
@with_cache_options
@click.option("--plain", is_flag=True, help="A line-by-line chat instead of the app.")
@click.pass_context
def chat(ctx: click.Context, /, plain: bool = False, **kw: Any) -> None:
    """The app (in a terminal), or questions line by line (--plain, or input piped)."""
    chosen = flags(**kw)
    settings = settings_of(ctx, chosen)
    interactive = sys.stdin is not None and sys.stdin.isatty()
    if interactive and sys.stdout.isatty() and not plain:
        from assistant.tui.app import run

        ended = run(settings, base=ctx.obj["settings"], flags=chosen)
        if ended:
            ctx.exit(ended)
        return
    with signals.ending_as_interrupted() as signalled, signals.ended_there(signalled):
        _chat_lines(ctx, settings, chosen, interactive, signalled)


def _chat_lines(
    ctx: click.Context,
    settings: Settings,
    chosen: dict[str, Any],
    interactive: bool,
    signalled: list[int],
) -> None:
    """`drag chat --plain`'s questions, line by line, until its input ends."""
    from assistant.core import pipeline
    from assistant.core.session import Session
    from assistant.serve import client

    status = status_printer(True)
    conversation: int | None = None  # the history's, shared with a running drag serve

    def on_text(piece: str) -> None:
        echo(piece, nl=False)

    with Session(settings, status=status) as rt:
        tidy(rt)
        if interactive:
            secho(
                f"drag · student {settings.student.model} · teacher {settings.teacher.endpoint}"
                f" · mode {settings.pipeline.mode}. Ask a question; Ctrl+D quits.",
                bold=True,
            )
        while True:
            try:
                line = chat_line("› " if interactive else "", interactive)
            except errors.InputError as exc:  # a line that is not UTF-8 (kept): the next
                secho(f"drag: error: {exc}", err=True, fg="red")
                continue
            if line is None:
                break
            if not line.strip():
                continue
            try:
                # A running drag serve answers it where it can (a review: asked here).
                result = client.ask(
                    ctx.obj["settings"], line, chosen, yes=False, on_text=on_text,
                    conversation=conversation, review=ask_in_terminal if can_ask() else None,
                )  # fmt: skip
                if result is None:
                    if conversation is not None:  # as the history has it now: the
                        rt.resume(conversation)  # server's turns may have added to it
                    result = pipeline.ask(
                        rt,
                        line,
                        on_text=on_text,
                        progress=_end_streamed_line,
                        **review_options(False, False),
                    )
                elif result.answer:
                    echo()
                conversation = result.conversation_id or conversation
                echo(_format_result(result, streamed=True))
            except (errors.DragError, KeyboardInterrupt) as exc:
                error = kept(line, exc)  # first: a terminal gone (SIGHUP) fails what is said
                try:
                    echo()
                    secho(f"drag: error: {error}", err=True, fg="red")
                except OSError:
                    if not signalled:
                        raise
                if signalled:  # SIGTERM or SIGHUP: the question kept (said), the chat ends
                    ctx.exit(signals.status(signalled[0]))  # (Ctrl+C goes on to the next question)

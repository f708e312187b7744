"""`drag bench …`: click wrappers over the benchmarks' own argument parsers."""

from __future__ import annotations

import click

from assistant.cli.root import cli
from assistant.core.bench_package import installed


@cli.group("bench")
def bench_group() -> None:
    """Benchmarks that print figures: privacy, accuracy, the pipeline, the store, start-up."""


PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@bench_group.command("privacy", context_settings=PASS_THROUGH)
@click.pass_context
def bench_privacy(ctx: click.Context) -> None:
    """What leaves the machine: leakage per entity type, with baselines (--help for options)."""
    with installed():
        from drag_bench import privacy

    ctx.exit(privacy.main(list(ctx.args)))


@bench_group.command("accuracy", context_settings=PASS_THROUGH)
@click.pass_context
def bench_accuracy(ctx: click.Context) -> None:
    """The DRAG effect: student alone vs evidence, graph, both, by K (--help for options)."""
    with installed():
        from drag_bench import accuracy

    ctx.exit(accuracy.main(list(ctx.args)))


@bench_group.command("speed", context_settings=PASS_THROUGH)
@click.pass_context
def bench_speed(ctx: click.Context) -> None:
    """Students side by side: load, prefill, first token, decode (--help for options)."""
    with installed():
        from drag_bench import speed

    ctx.exit(speed.main(list(ctx.args)))


@bench_group.command("builds", context_settings=PASS_THROUGH)
@click.pass_context
def bench_builds(ctx: click.Context) -> None:
    """llama.cpp builds side by side (each venv's own): prefill and decode (--help)."""
    with installed():
        from drag_bench import builds

    ctx.exit(builds.main(list(ctx.args)))


@bench_group.command("embedder", context_settings=PASS_THROUGH)
@click.pass_context
def bench_embedder(ctx: click.Context) -> None:
    """The embedder on ONNX Runtime and on torch, side by side: speed and agreement."""
    with installed():
        from drag_bench import embedder

    ctx.exit(embedder.main(list(ctx.args)))


@bench_group.command("startup", context_settings=PASS_THROUGH)
@click.pass_context
def bench_startup(ctx: click.Context) -> None:
    """How soon the app shows its first screen, in tmux, against a bare Textual app."""
    with installed():
        from drag_bench import startup

    ctx.exit(startup.main(list(ctx.args)))


@bench_group.command("reader-start", context_settings=PASS_THROUGH)
@click.pass_context
def bench_reader_start(ctx: click.Context) -> None:
    """The privacy reader's first reading in a new process: its prompt's head from disk or not."""
    with installed():
        from drag_bench import readerstart

    ctx.exit(readerstart.main(list(ctx.args)))


@bench_group.command("gate-cost", context_settings=PASS_THROUGH)
@click.pass_context
def bench_gate_cost(ctx: click.Context) -> None:
    """What the confidence gate adds to an answer's time, with and without it side by side."""
    with installed():
        from drag_bench import gatecost

    ctx.exit(gatecost.main(list(ctx.args)))


@bench_group.command("serve", context_settings=PASS_THROUGH)
@click.pass_context
def bench_serve(ctx: click.Context) -> None:
    """drag serve's privacy proxy: its cost per request, and 8 clients at once."""
    with installed():
        from drag_bench import serveload

    ctx.exit(serveload.main(list(ctx.args)))


@bench_group.command("store", context_settings=PASS_THROUGH)
@click.pass_context
def bench_store(ctx: click.Context) -> None:
    """Offline answers vs the teacher, cache hits, retrieval at scale (--help for options)."""
    with installed():
        from drag_bench import store as bench

    ctx.exit(bench.main(list(ctx.args)))


@bench_group.command("local-docs", context_settings=PASS_THROUGH)
@click.pass_context
def bench_local_docs(ctx: click.Context) -> None:
    """Answers from your own files: MiniRAG-style vs vector RAG on LiHuaWorld (--help)."""
    with installed():
        from drag_bench import localdocs

    ctx.exit(localdocs.main(list(ctx.args)))

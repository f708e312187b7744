"""What `drag serve`'s privacy proxy costs, and how it holds 8 clients at once (issue 50).

    drag bench serve [--requests 40] [--reader-requests 20] [--seconds 60] [--clients 8]

A teacher that answers at once is started on 127.0.0.1 (it writes back what it
received, so the placeholders come back to be restored): what is timed is the proxy's
own work, not a model's.  Everything runs in a throw-away ``DRAG_HOME`` (its own
database, ledger and client keys; the models are the installed ones).

1. **Cost**: the same 300-character messages (each with a name, an e-mail address and a
   phone number) sent with the real ``openai`` client to the teacher directly and
   through `drag serve` (model = the teacher's), taking turns request by request; with
   the privacy reader off, then on.  p50 / p95 seconds of each, and the ratio.
2. **Load**: ``--clients`` clients, each with its own key and its own values, sending
   as fast as they are answered for ``--seconds`` (reader off, queue 8, no retries):
   requests answered, 429s, other errors, and whether anything was mixed: a client's
   values in another's reply, or any value in what the teacher received or in the
   ledger.  The ledger is verified at the end.

It prints the figures and writes ``summary.json`` and ``summary.md`` to ``--out``.

    drag bench serve --first-byte 10

times instead the first answer byte of ``drag ask --offline`` on the last 10 questions of
the configured store's cache (each asked the way its entry was cached): first each as a
new process with no server (the cold path), then each again through a ``drag serve``
started for the purpose (after one untimed question, which loads its models).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from drag_bench import arguments
from drag_bench.stats import spread

TEACHER_MODEL = "bench-teacher"
PEOPLE = [
    ("Marta Kowalczyk", "marta.kowalczyk@example.org", "+48 601 234 567"),
    ("Jonathan Whitfield", "j.whitfield@example.com", "+44 7911 123456"),
    ("Aiko Tanaka", "aiko.tanaka@example.jp", "+81 90 1234 5678"),
    ("Samuel Okafor", "sam.okafor@example.ng", "+234 803 123 4567"),
    ("Lucía Fernández", "lucia.fernandez@example.es", "+34 612 345 678"),
    ("Henrik Larsen", "henrik.larsen@example.dk", "+45 20 12 34 56"),
    ("Priya Raman", "priya.raman@example.in", "+91 98765 43210"),
    ("Claire Dubois", "claire.dubois@example.fr", "+33 6 12 34 56 78"),
]


def message(name: str, mail: str, phone: str) -> str:
    """About 300 characters of a real-looking request with three values in it."""
    text = (
        f"Please draft a short, friendly reply to {name} ({mail}, {phone}), who asked "
        "whether the workshop on Thursday still starts at nine and whether lunch is "
        "included. Say yes to both, mention that parking is free after eight, and ask "
        "them to confirm by Tuesday so that we can order enough food for everyone."
    )
    return text


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arguments("serve", __doc__)
    parser.add_argument("--requests", type=int, default=40, help="timed requests each way")
    parser.add_argument(
        "--reader-requests", type=int, default=20, help="the same with the reader on (0: skip)"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="the load part's length")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--first-byte", type=int, default=0, metavar="RUNS",
        help="time drag ask --offline cold and through drag serve instead",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("bench-results/serve"))
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    args.command = "drag bench serve " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.first_byte:
        return first_byte_main(args)
    if args.requests < 2 or args.clients < 1 or args.seconds <= 0:
        print("bench: error: --requests 2 or more, --clients 1 or more", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="drag-bench-serve-") as home:
        os.environ["DRAG_HOME"] = home  # before anything reads a path
        os.environ.setdefault("DRAG_TEACHER_API_KEY", "bench")
        summary = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.out / "summary.md").write_text(render(summary))
    print(render(summary))
    return 0


class _Teacher(ThreadingHTTPServer):
    daemon_threads = True
    received: list[bytes]


def _teacher() -> _Teacher:
    """An OpenAI-compatible teacher on 127.0.0.1 that answers at once with what it got."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # as drag serve's: no delayed-ACK wait per reply

        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            server.received.append(raw)
            said = " | ".join(str(m.get("content")) for m in json.loads(raw)["messages"])
            body = json.dumps(
                {
                    "id": "bench",
                    "object": "chat.completion",
                    "created": 0,
                    "model": TEACHER_MODEL,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": f"Reply to: {said}"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = _Teacher(("127.0.0.1", 0), Handler)
    server.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _Serving:
    """`drag serve` in this process (the real server, session and models)."""

    def __init__(self, teacher_url: str, reader: str, queue: int = 8) -> None:
        from assistant.base import config
        from assistant.core.session import Session
        from assistant.serve.server import Server

        settings = config.load().with_flags(
            {
                "teacher.endpoint": teacher_url,
                "teacher.model": TEACHER_MODEL,
                "teacher.max_retries": 0,
                "privacy.review": "never",
                "privacy.reader": reader,
            }
        )
        self.session = Session(settings)
        self.server = Server(("127.0.0.1", 0), self.session, queue=queue)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
        self.session.close()


def _client(base_url: str, key: str) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=300)


def _timed(client: Any, text: str) -> tuple[float, str]:
    started = time.perf_counter()
    reply = client.chat.completions.create(
        model=TEACHER_MODEL, messages=[{"role": "user", "content": text}]
    )
    return time.perf_counter() - started, reply.choices[0].message.content or ""


def cost(teacher: _Teacher, reader: str, n: int) -> dict[str, Any]:
    """Direct and proxied requests in turns; the first of each untimed (warm-up)."""
    from assistant.serve import tokens

    serving = _Serving(f"http://127.0.0.1:{teacher.server_address[1]}/v1", reader)
    try:
        direct = _client(f"http://127.0.0.1:{teacher.server_address[1]}/v1", "bench")
        proxied = _client(serving.server.url, tokens.token_for(tokens.DEFAULT))
        times: dict[str, list[float]] = {"direct": [], "proxy": []}
        restored = 0
        for i in range(n + 1):
            text = message(*PEOPLE[i % len(PEOPLE)])
            ways = [("direct", direct), ("proxy", proxied)]
            for way, client in ways if i % 2 else ways[::-1]:
                seconds, reply = _timed(client, text)
                if i:
                    times[way].append(seconds)
                if way == "proxy" and PEOPLE[i % len(PEOPLE)][0] in reply:
                    restored += 1
    finally:
        serving.close()
    d, p = spread(times["direct"]), spread(times["proxy"])
    return {
        "reader": reader,
        "requests": n,
        "direct": d,
        "proxy": p,
        "ratio_p50": p["p50"] / d["p50"],
        "added_p50_seconds": p["p50"] - d["p50"],
        "replies_with_the_name_restored": restored,
    }


def load(teacher: _Teacher, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` clients at once for ``seconds``: answered, 429s, errors, mixing."""
    import openai

    from assistant.serve import tokens
    from assistant.store import ledger

    teacher.received.clear()
    serving = _Serving(f"http://127.0.0.1:{teacher.server_address[1]}/v1", "off")
    counts: dict[str, int] = {"answered": 0, "busy_429": 0, "errors": 0, "mixed": 0}
    lock = threading.Lock()
    values = [PEOPLE[i % len(PEOPLE)] for i in range(clients)]
    deadline = time.monotonic() + seconds

    def one(i: int) -> None:
        client = _client(serving.server.url, tokens.token_for(f"client-{i + 1}"))
        mine = values[i]
        others = [v for j, v in enumerate(values) if v != mine and j != i]
        while time.monotonic() < deadline:
            try:
                _s, reply = _timed(client, message(*mine))
                kind = "answered"
                if mine[0] not in reply or any(o[0] in reply or o[1] in reply for o in others):
                    kind = "mixed"
            except openai.RateLimitError:
                kind = "busy_429"
            except openai.OpenAIError:
                kind = "errors"
            with lock:
                counts[kind] += 1

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sent = b"\n".join(teacher.received).decode("utf-8", "replace")
        store = serving.session.store
        rows = ledger.select(store.db)
        verdict = store.verify_ledger()
    finally:
        serving.close()
    everything = [x for person in values for x in person]
    in_rows = "\n".join(
        (r["request"] or b"").decode("utf-8", "replace") + str(r["reply"]) for r in rows
    )
    return {
        "clients": clients,
        "seconds": seconds,
        **counts,
        "values_the_teacher_received": sorted({v for v in everything if v in sent}),
        "values_in_the_ledger": sorted({v for v in everything if v in in_rows}),
        "ledger_rows": len(rows),
        "ledger_verifies": verdict.ok,
        "purposes": sorted({r["purpose"] for r in rows}),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    teacher = _teacher()
    try:
        runs = [cost(teacher, "off", args.requests)]
        if args.reader_requests:
            runs.append(cost(teacher, "on", args.reader_requests))
        loaded = load(teacher, args.clients, args.seconds)
    finally:
        teacher.shutdown()
        teacher.server_close()
    return {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpus": os.cpu_count(),
        "cost": runs,
        "load": loaded,
        "command": args.command,
    }


def _rows(summary: dict[str, Any]) -> Iterator[str]:
    yield (
        "| reader | requests | direct p50 / p95 (s) | through drag serve p50 / p95 (s) "
        "| p50 ratio | added p50 (s) |"
    )
    yield "|---|---:|---:|---:|---:|---:|"
    for c in summary["cost"]:
        d, p = c["direct"], c["proxy"]
        yield (
            f"| {c['reader']} | {c['requests']} | {d['p50']:.3f} / {d['p95']:.3f} | "
            f"{p['p50']:.3f} / {p['p95']:.3f} | {c['ratio_p50']:.1f}× | "
            f"{c['added_p50_seconds']:.3f} |"
        )


def render(summary: dict[str, Any]) -> str:
    load_ = summary["load"]
    lines = [
        f"# drag bench serve ({summary['when']}, {summary['cpus']} CPUs)",
        "",
        "The proxy's own cost on a 300-character message (an instant loopback teacher):",
        "",
        *_rows(summary),
        "",
        f"{load_['clients']} clients for {load_['seconds']:g} s (reader off, queue 8): "
        f"{load_['answered']} answered, {load_['busy_429']} HTTP 429, {load_['errors']} "
        f"other errors, {load_['mixed']} replies mixed or unrestored; values the teacher "
        f"received: {load_['values_the_teacher_received'] or 'none'}; values in the "
        f"ledger: {load_['values_in_the_ledger'] or 'none'}; the run's {load_['ledger_rows']} "
        f"ledger rows: chain {'verifies' if load_['ledger_verifies'] else 'BROKEN'}.",
        "",
    ]
    return "\n".join(lines)


def _first_text(question: str, n: int, graph: bool) -> tuple[float, float, int]:
    """Seconds until the running server's first answer text, asked by drag's own client
    code in this process (the flags `drag ask --offline --mode … --n …` sends); and the
    seconds and tokens of the prompt its student read before its first token (the
    answer's own record)."""
    from assistant.base import config
    from assistant.serve import client

    flags = {"pipeline.mode": "combined" if graph else "evidence", "pipeline.n": n}
    flags["store.offline"] = True
    started = time.perf_counter()
    first: list[float] = []

    def on_text(piece: str) -> None:
        if not first and piece.strip():
            first.append(time.perf_counter() - started)

    result = client.ask(config.load(), question, flags, yes=False, on_text=on_text)
    if result is None:
        raise RuntimeError("drag serve did not answer a question through the client")
    if not first:
        raise RuntimeError("drag serve answered with no text")
    return first[0], float(result.student["prompt_seconds"]), int(result.student["prompt_tokens"])


def first_byte(runs: int, command: str) -> dict[str, Any]:
    """First answer byte of cached questions asked offline: cold, then through a server."""
    import subprocess

    from assistant.serve import tokens
    from drag_bench.startup import cached_questions, first_answer_byte

    if tokens.recorded() is not None:
        raise RuntimeError("a drag serve runs already: stop it, so that the cold runs are cold")
    questions = cached_questions(runs)
    if not questions:
        raise RuntimeError("the local cache holds no question to ask offline")
    commands = [
        [sys.executable, "-m", "assistant", "ask", "--offline", "--mode",
         "combined" if graph else "evidence", "--n", str(n), question]
        for question, n, graph in questions
    ]  # fmt: skip
    cold = [first_answer_byte(c)[0] for c in commands]
    server = subprocess.Popen(
        [sys.executable, "-m", "assistant", "serve", "--port", "0", "--keep-alive", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        if "listening on" not in server.stdout.readline():
            raise RuntimeError("drag serve did not start")
        first_answer_byte(commands[0])  # the server loads its models: not timed
        warm = [first_answer_byte(c)[0] for c in commands]
        # The same through the same client code in this process: the server's part alone
        # (no new process, no imports), so that the two parts are told apart.
        served = [_first_text(q, n, graph) for q, n, graph in questions]
    finally:
        server.terminate()
        server.wait(60)
    firsts, seconds, counts = ([row[i] for row in served] for i in range(3))
    c, w, v, r = spread(cold), spread(warm), spread(firsts), spread(seconds)
    return {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpus": os.cpu_count(),
        "runs": len(commands),
        "cold": {**c, "all": cold},
        "through_serve": {**w, "all": warm},
        "server_alone": {**v, "all": firsts},
        # Of the server's part, its student reading the prompt (the question, and the
        # context where one is read) before its first token: llama.cpp's prefill.
        "student_prompt": {**r, "all": seconds, "tokens": counts},
        "ratio_p50": c["p50"] / w["p50"],
        "target_p50_s": 1.0,
        "command": command,
    }


def first_byte_main(args: argparse.Namespace) -> int:
    try:
        summary = first_byte(args.first_byte, args.command)
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 1
    c, w, v = summary["cold"], summary["through_serve"], summary["server_alone"]
    r = summary["student_prompt"]
    text = "\n".join(
        [
            f"# drag ask --offline, {summary['runs']} cached questions "
            f"({summary['when']}, {summary['cpus']} CPUs)",
            "",
            "| first answer byte | p50 | p95 |",
            "|---|---:|---:|",
            f"| a cold process | {c['p50']:.2f} s | {c['p95']:.2f} s |",
            f"| through drag serve | {w['p50']:.2f} s | {w['p95']:.2f} s |",
            f"| of which the server (its client in-process) | {v['p50']:.2f} s "
            f"| {v['p95']:.2f} s |",
            f"| of which its student reading the prompt | {r['p50']:.2f} s | {r['p95']:.2f} s |",
            "",
            f"its student's prompt: {statistics.median(r['tokens']):g} tokens at the median",
            "",
            f"cold / through drag serve at p50: {summary['ratio_p50']:.1f}×; target through "
            f"drag serve <= 1 s: {'met' if w['p50'] <= 1.0 else 'NOT met'}",
            "",
        ]
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "first-byte.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.out / "first-byte.md").write_text(text)
    print(text)
    return 0

"""Start-up benchmark: how long `drag` takes to show its first screen in a real terminal.

Each run starts the app in a tmux window of its own (a private tmux server, 120x40),
reads the screen every 10 ms and stops the clock when the chat's input line is drawn.
The same is done, in the same run, for a bare Textual app that shows one line: the
floor set by Python and Textual themselves.  The app runs on your configuration and
store as they are; models load in the background and are not waited for.

    drag bench startup [--runs 5]

Needs tmux.  The target is a first paint within 1.5 s.

``--ask-offline`` times a cold ``drag ask --offline`` instead: a new process per run,
from its start to the first byte of the answer on its terminal, and to its exit.  The
questions are the last ``--runs`` the local cache holds (without placeholders), asked
with your configuration, in the mode their cache entry covers (combined where it holds
a graph, evidence otherwise).  The target is a first answer byte within 3 s.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from drag_bench import arguments

APP_MARK = "Ask a question"
BARE_MARK = "bare textual ready"
BARE_APP = (
    "from textual.app import App\n"
    "from textual.widgets import Static\n"
    "class Bare(App):\n"
    "    def compose(self):\n"
    f"        yield Static({BARE_MARK!r})\n"
    "Bare().run()\n"
)


def first_paint(command: list[str], mark: str, *, timeout: float = 60) -> float:
    """Seconds from starting ``command`` in a fresh tmux window until ``mark`` shows."""
    # A server of its own each time: a socket just killed may still be shutting down.
    socket = f"drag-startup-{os.getpid()}-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", socket]
    # -u: a LINES/COLUMNS inherited from the caller would fix the app's size.
    shell = "env -u LINES -u COLUMNS " + shlex.join(command)
    started = time.perf_counter()
    subprocess.run([*tmux, "new-session", "-d", "-x", "120", "-y", "40", shell], check=True)
    try:
        while time.perf_counter() - started < timeout:
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p"], capture_output=True, text=True
            ).stdout
            if mark in screen:
                return time.perf_counter() - started
            time.sleep(0.01)
        raise TimeoutError(f"nothing showed {mark!r} within {timeout:g} s")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def first_answer_byte(command: list[str], *, timeout: float = 300) -> tuple[float, float]:
    """Seconds from starting ``command`` with its output on a terminal of its own until
    the first printable byte there, and until it exits.  Its standard error is not a
    terminal, so the CLI prints no status lines: the first byte is the answer's."""
    main, side = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=side, stderr=subprocess.DEVNULL
    )
    os.close(side)
    first: float | None = None
    try:
        while True:
            ready, _, _ = select.select([main], [], [], timeout)
            if not ready:
                proc.kill()
                raise TimeoutError(f"{shlex.join(command[:4])}… wrote nothing for {timeout:g} s")
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the process has closed its terminal
                break
            if not chunk:
                break
            if first is None and chunk.strip():
                first = time.perf_counter() - started
    finally:
        os.close(main)
        proc.wait(timeout)
    ended = time.perf_counter() - started
    if proc.returncode != 0 or first is None:
        raise RuntimeError(f"drag ask --offline exited {proc.returncode} without an answer")
    return first, ended


def cached_questions(count: int) -> list[tuple[str, int, bool]]:
    """The last ``count`` questions of the configured store's cache without placeholders,
    each with its number of statements and whether it holds a graph."""
    from assistant.base import config
    from assistant.store import Store

    s = config.load().store
    with Store.configured(s.database, s.key) as store:
        rows = store.db.execute(
            "SELECT question, n, has_graph FROM cache_entries WHERE question NOT LIKE '%<%' "
            "ORDER BY id DESC LIMIT ?",
            [count],
        ).fetchall()
    return [(r[0], int(r[1]), bool(r[2])) for r in rows]


def ask_offline(runs: int, as_json: bool) -> int:
    questions = cached_questions(runs)
    if not questions:
        print(
            "bench: error: the local cache holds no question to ask offline; ask some "
            "online first (drag ask …)",
            file=sys.stderr,
        )
        return 2
    first, total = [], []
    try:
        for question, n, has_graph in questions:
            mode = "combined" if has_graph else "evidence"  # what its cache entry covers
            ask = ["ask", "--offline", "--mode", mode, "--n", str(n), question]
            seconds = first_answer_byte([sys.executable, "-m", "assistant", *ask])
            first.append(seconds[0])
            total.append(seconds[1])
            print(f"first byte {seconds[0]:.2f} s, exit {seconds[1]:.2f} s", file=sys.stderr)
    except (TimeoutError, RuntimeError, OSError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 1
    report = {
        "runs": len(questions),
        "first_answer_byte_s": {"p50": statistics.median(first), "max": max(first), "all": first},
        "exit_s": {"p50": statistics.median(total), "max": max(total), "all": total},
        "target_s": 3.0,
    }
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"## A cold drag ask --offline, {len(questions)} cached questions\n")
    print("| from process start to | p50 | max |\n|---|---:|---:|")
    print(f"| the answer's first byte | {statistics.median(first):.2f} s | {max(first):.2f} s |")
    print(f"| the process's exit | {statistics.median(total):.2f} s | {max(total):.2f} s |")
    verdict = "met" if statistics.median(first) <= 3.0 else "NOT met"
    print(f"\ntarget first answer byte <= 3 s: {verdict}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = arguments("startup", __doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--ask-offline", action="store_true", help="time a cold drag ask --offline instead"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        print("bench: error: --runs must be at least 1", file=sys.stderr)
        return 2
    if args.ask_offline:
        return ask_offline(args.runs, args.json)
    if shutil.which("tmux") is None:
        print("bench: error: this benchmark needs tmux (apt install tmux)", file=sys.stderr)
        return 2
    times: dict[str, list[float]] = {"drag": [], "bare Textual app": []}
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp, "bare_app.py")
        bare.write_text(BARE_APP, "utf-8")
        commands = {
            "drag": ([sys.executable, "-m", "assistant"], APP_MARK),
            "bare Textual app": ([sys.executable, str(bare)], BARE_MARK),
        }
        try:
            for _ in range(args.runs):  # interleaved, so both see the same machine load
                for name, (command, mark) in commands.items():
                    times[name].append(first_paint(command, mark))
        except (TimeoutError, subprocess.CalledProcessError, OSError) as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            return 1
    p50 = {name: statistics.median(ts) for name, ts in times.items()}
    report = {
        "runs": args.runs,
        "first_paint_s": {
            name: {"p50": p50[name], "max": max(ts), "all": ts} for name, ts in times.items()
        },
        "drag_over_bare": p50["drag"] / p50["bare Textual app"],
        "target_s": 1.5,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"## First paint in a real terminal (tmux), {args.runs} runs each\n")
    print("| app | p50 | max |\n|---|---:|---:|")
    for name, ts in times.items():
        print(f"| {name} | {p50[name]:.2f} s | {max(ts):.2f} s |")
    verdict = "met" if p50["drag"] <= 1.5 else "NOT met"
    print(
        f"\ndrag / bare Textual = {report['drag_over_bare']:.2f}; "
        f"target first paint <= 1.5 s: {verdict}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

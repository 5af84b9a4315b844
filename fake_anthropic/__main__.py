"""`python -m fake_anthropic --port 0 --latency 1.0 --script FILE`: serve until SIGTERM/SIGINT.

Prints `listening on http://127.0.0.1:PORT` (one line, flushed) once it accepts connections.
The script file is a JSON script document (`FakeState.load`); `--latency`, `--role-latency`,
`--batch-delay` and `--default-responder` are merged into it (the flags win), and the whole is
the start configuration that `POST /_control/reset` returns to.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fake_anthropic.server import FakeAnthropic


def _role_value(text: str) -> tuple[str, str]:
    role, sep, value = text.partition("=")
    if not sep or not role:
        raise argparse.ArgumentTypeError(f"expected ROLE=VALUE, got {text!r}")
    return role, value


def argument_parser() -> argparse.ArgumentParser:
    """The command line of `python -m fake_anthropic`."""
    parser = argparse.ArgumentParser(
        prog="python -m fake_anthropic", description="A fake Anthropic Messages API server."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument(
        "--latency", type=float, help="seconds before answering (wins over the script's)"
    )
    parser.add_argument(
        "--role-latency", type=_role_value, action="append", default=[], metavar="ROLE=SECONDS"
    )
    parser.add_argument("--script", type=Path, help="a JSON script document to load at start")
    parser.add_argument("--script-json", help="the same document, inline")
    parser.add_argument("--required-key", help="the only x-api-key accepted (default: any)")
    parser.add_argument(
        "--default-responder",
        action="append",
        default=[],
        metavar="[ROLE=]SPEC",
        help="module:function or 'minimal', for every role or one",
    )
    parser.add_argument("--hang-seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, help="seed for minted ids")
    parser.add_argument("--record-limit", type=int, help="keep only the latest N requests")
    parser.add_argument(
        "--batch-delay", type=float, help="seconds a Message Batch stays in_progress"
    )
    return parser


def start_document(args: argparse.Namespace) -> dict[str, Any]:
    """The start script the parsed command line makes: the script file or JSON, then the flags
    merged over it."""
    document: dict[str, Any] = {}
    if args.script is not None:
        document.update(json.loads(args.script.read_text(encoding="utf-8")))
    if args.script_json is not None:
        document.update(json.loads(args.script_json))
    responders = dict(document.get("responders") or {})
    for spec in args.default_responder:
        role, _, path = spec.rpartition("=")
        responders[role or "*"] = path
    if responders:
        document["responders"] = responders
    if args.latency is not None:
        document["latency"] = args.latency
    if args.batch_delay is not None:
        document["batch_delay"] = args.batch_delay
    role_latency = dict(document.get("role_latency") or {})
    role_latency.update({role: float(seconds) for role, seconds in args.role_latency})
    if role_latency:
        document["role_latency"] = role_latency
    return document


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, start the server, print its address, serve until told to stop."""
    args = argument_parser().parse_args(argv)
    # Everything given at start is the start configuration, which reset() returns to.
    fake = FakeAnthropic(
        required_key=args.required_key,
        hang_seconds=args.hang_seconds,
        seed=args.seed,
        script=start_document(args),
        record_limit=args.record_limit,
        host=args.host,
        port=args.port,
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    fake.start()
    print(f"listening on {fake.base_url}", flush=True)
    fake.serve_until(stop)


if __name__ == "__main__":
    main()

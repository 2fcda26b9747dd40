"""Run the `oabench` CLI in this process and SIGKILL it at an exact point of its file I/O.

    python -m oabench_pipeline_tests.inference.crash_child [--die-on EVENT:REGEX[#N]] -- run --models ...

Nothing of the pipeline is replaced: a `sys.addaudithook` hook watches the interpreter's own audit events
(`open` of a path, `os.rename` — which `os.replace` raises — to a destination) and, at the N-th event whose
path matches REGEX, sends SIGKILL to this process's group: the command, Dagster's code server and the cell
runs it launched, as a crash of the machine would. That hits points an outside observer cannot hit
reliably, e.g. "a partition file is written and fsynced but not yet renamed into place". The processes the
command starts install the same hook at start-up (`crash_site/sitecustomize.py`), each counting its own
events.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

WATCHED_EVENTS = ("open", "os.rename")
DIE_ON_VARIABLE = "OABENCH_TEST_DIE_ON"  # read by crash_site/sitecustomize.py in the processes started here
CRASH_SITE = Path(__file__).parent / "crash_site"


def _event_path(event: str, args: tuple[Any, ...]) -> str | None:
    """The path an audit event is about: the opened file, or the rename's destination."""
    value = args[0] if event == "open" else args[1]
    if isinstance(value, bytes):
        return os.fsdecode(value)
    return value if isinstance(value, str) else None


def kill_hook(spec: str) -> Callable[[str, tuple[Any, ...]], None]:
    """An audit hook for `EVENT:REGEX[#N]` that SIGKILLs the process at the N-th (default 1st) match."""
    event_name, _, rest = spec.partition(":")
    if event_name not in WATCHED_EVENTS:
        raise ValueError(f"--die-on event must be one of {WATCHED_EVENTS}, got {event_name!r}")
    pattern, _, nth_text = rest.rpartition("#") if "#" in rest else (rest, "", "1")
    regex, nth = re.compile(pattern), int(nth_text)
    seen = 0

    def hook(event: str, args: tuple[Any, ...]) -> None:
        nonlocal seen
        if event != event_name:
            return
        path = _event_path(event, args)
        if path is None or not regex.search(path):
            return
        seen += 1
        if seen >= nth:
            os.killpg(os.getpgrp(), signal.SIGKILL)

    return hook


def main(argv: list[str]) -> None:
    if "--" not in argv:
        raise SystemExit("usage: crash_child [--die-on EVENT:REGEX[#N]] -- <oabench arguments>")
    split = argv.index("--")
    own, cli_args = argv[:split], argv[split + 1 :]
    if own[:1] == ["--die-on"] and len(own) == 2:
        if os.getpgrp() != os.getpid():
            raise SystemExit(
                "--die-on kills its process group: start it in one of its own (start_new_session)"
            )
        sys.addaudithook(kill_hook(own[1]))
        os.environ[DIE_ON_VARIABLE] = own[1]
        paths = [str(CRASH_SITE), str(CRASH_SITE.parents[2]), os.environ.get("PYTHONPATH", "")]
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    elif own:
        raise SystemExit(f"unexpected arguments {own}")
    from oabench_pipeline.cli import main as oabench

    oabench(cli_args)


if __name__ == "__main__":
    main(sys.argv[1:])

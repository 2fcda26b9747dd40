"""`inference/interrupts.py` in one process: a signal to the command is written to its stop file at once, and a
launched run watching that file stops with the command's reason, whichever signal reaches it after."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from oabench_pipeline.inference import interrupts


@pytest.fixture(autouse=True)
def no_stop_before_or_after() -> Iterator[None]:
    # The handlers are set on the main thread only; elsewhere these signals would end the test process.
    assert threading.current_thread() is threading.main_thread()
    interrupts.reset()
    yield
    interrupts.reset()


def test_a_signal_to_the_command_is_written_to_its_stop_file_at_once(tmp_path: Path) -> None:
    stop = tmp_path / "progress" / "command.stop"
    with interrupts.announcing_stops_to(stop), interrupts.stop_on_signals():
        assert not stop.exists()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.read_text(encoding="utf-8") == "interrupted (SIGTERM)"
        assert interrupts.requested() == "interrupted (SIGTERM)"
    assert stop.exists()  # a run still starting when the command exits must find it
    assert interrupts.exit_code() == 143


def test_a_watching_run_stops_with_the_commands_reason_before_its_own_signal(tmp_path: Path) -> None:
    stop = tmp_path / "command.stop"
    with interrupts.watching(stop), interrupts.stop_on_signals():
        assert interrupts.requested() is None  # no file: nothing asked
        stop.write_text("interrupted (SIGTERM)", encoding="utf-8")
        # Dagster's terminate then interrupts the run's process: the command's reason stays the one given,
        # and a second signal does not end the run at once (it saves what lands).
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        assert interrupts.requested() == "interrupted (SIGTERM)"
        stop.unlink()
        assert interrupts.requested() == "interrupted (SIGTERM)"

"""`python -m memsite.keep_running`, the wrapper of each Procfile line: a command that exits on its
own is restarted and the restart reported; SIGTERM/SIGINT stop the command and the wrapper; under
honcho, as `make run` starts them, one crashing process leaves the others running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsite.keep_running import MAX_DELAY, describe_exit, exit_status, restart_delay
from tests.worker_process import ROOT, wait_for

# A command that logs each start; the first start exits 1, later ones run until SIGTERM and log it.
CRASHES_ONCE = textwrap.dedent(
    """
    import os, signal, sys, time
    log = sys.argv[1]
    starts = sum(line.startswith("start") for line in open(log)) if os.path.exists(log) else 0
    with open(log, "a") as f:
        f.write(f"start {os.getpid()}\\n")
    if starts == 0 or sys.argv[2] == "always":
        sys.exit(1)

    def stopped(signum, frame):
        with open(log, "a") as f:
            f.write(f"stopped by {signal.Signals(signum).name}\\n")
        sys.exit(0)

    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
    while True:
        time.sleep(1)
    """
)
IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"
)


class Running:
    """A process whose stdout and stderr are collected into `lines`."""

    def __init__(self, argv: list[str], **popen: object) -> None:
        self.process = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen
        )
        self.lines: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def has_line(self, text: str) -> bool:
        return any(text in line for line in self.lines)


def log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: only its parent has not collected it yet.
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"


def keep_running(*command: str, name: str = "flaky", stop_timeout: float = 4.0) -> list[str]:
    return [
        sys.executable,
        "-m",
        "memsite.keep_running",
        "--name",
        name,
        "--stop-timeout",
        str(stop_timeout),
        "--",
        *command,
    ]


@pytest.fixture
def started() -> Iterator[list[Running]]:
    """Processes a test starts; killed (with their groups) if the test left them running."""
    processes: list[Running] = []
    yield processes
    for running in processes:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait(10)


def test_restart_delays_double_from_one_second_up_to_a_cap() -> None:
    assert [restart_delay(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert restart_delay(50) == MAX_DELAY


def test_an_exit_is_described_as_a_shell_would() -> None:
    assert describe_exit(1) == "exited with code 1"
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"
    assert exit_status(-signal.SIGTERM) == 143 and exit_status(3) == 3


def test_a_command_that_exits_is_restarted_and_the_restart_reported(tmp_path: Path, started: list[Running]) -> None:
    log = tmp_path / "starts.log"
    supervisor = Running(keep_running(sys.executable, "-c", CRASHES_ONCE, str(log), "once"))
    started.append(supervisor)

    wait_for(lambda: len(log_lines(log)) == 2, timeout=30, what="the command to be started again")

    first, second = (int(line.split()[1]) for line in log_lines(log))
    assert first != second and pid_alive(second)
    assert supervisor.has_line("keep_running: flaky exited with code 1; restart 1 in 1 s")
    assert supervisor.process.poll() is None


def test_sigterm_stops_the_command_and_then_the_supervisor(tmp_path: Path, started: list[Running]) -> None:
    log = tmp_path / "starts.log"
    supervisor = Running(keep_running(sys.executable, "-c", CRASHES_ONCE, str(log), "once"))
    started.append(supervisor)
    wait_for(lambda: len(log_lines(log)) == 2, timeout=30, what="the command to be running after its restart")
    command_pid = int(log_lines(log)[1].split()[1])

    supervisor.process.send_signal(signal.SIGTERM)

    assert supervisor.process.wait(timeout=10) == 0  # the command's own status: it stopped cleanly
    assert log_lines(log)[-1] == "stopped by SIGTERM"  # forwarded, not killed
    assert not pid_alive(command_pid)


def test_a_stop_while_waiting_to_restart_ends_the_supervisor_at_once(tmp_path: Path, started: list[Running]) -> None:
    log = tmp_path / "starts.log"
    supervisor = Running(keep_running(sys.executable, "-c", CRASHES_ONCE, str(log), "always"))
    started.append(supervisor)
    wait_for(lambda: supervisor.has_line("restart 2 in 2 s"), timeout=30, what="the second restart to be announced")

    supervisor.process.send_signal(signal.SIGINT)

    assert supervisor.process.wait(timeout=5) == 128 + signal.SIGINT
    assert len(log_lines(log)) == 2  # not started a third time


def test_a_command_that_ignores_the_stop_is_killed_after_the_stop_timeout(started: list[Running]) -> None:
    supervisor = Running(keep_running(sys.executable, "-c", IGNORES_SIGTERM, name="stubborn", stop_timeout=0.5))
    started.append(supervisor)
    wait_for(lambda: supervisor.has_line("up"), timeout=30, what="the command to start")

    supervisor.process.send_signal(signal.SIGTERM)

    assert supervisor.process.wait(timeout=10) == 128 + signal.SIGKILL
    assert supervisor.has_line("stubborn still running 0.5 s after SIGTERM: killing it")


def test_a_command_that_cannot_be_started_is_not_retried(started: list[Running]) -> None:
    supervisor = Running(keep_running(str(ROOT / "no-such-program"), name="typo"))
    started.append(supervisor)
    assert supervisor.process.wait(timeout=30) == 127
    assert supervisor.has_line("typo cannot be started, not retrying")


def test_under_honcho_a_crashing_process_is_restarted_while_the_others_run_on_and_ctrl_c_stops_all(
    tmp_path: Path, started: list[Running]
) -> None:
    steady_log, flaky_log = tmp_path / "steady.log", tmp_path / "flaky.log"
    (tmp_path / "steady.py").write_text(CRASHES_ONCE)
    # The same shape as the Procfile's lines: honcho runs each through a shell.
    (tmp_path / "Procfile").write_text(
        f"steady: {sys.executable} -m memsite.keep_running --name steady -- "
        f"{sys.executable} {tmp_path / 'steady.py'} {steady_log} once\n"
        f"flaky: {sys.executable} -m memsite.keep_running --name flaky -- "
        f"{sys.executable} {tmp_path / 'steady.py'} {flaky_log} always\n"
    )
    # Its own session, as a terminal would have it: the Ctrl-C below reaches honcho only.
    honcho = Running(
        [str(Path(sys.executable).parent / "honcho"), "-f", str(tmp_path / "Procfile"), "-d", str(ROOT), "start"],
        start_new_session=True,
    )
    started.append(honcho)
    wait_for(lambda: honcho.has_line("flaky exited with code 1; restart 2 in 2 s"), timeout=60, what="two restarts")
    wait_for(lambda: len(log_lines(steady_log)) == 2, timeout=30, what="the steady process to run")
    steady_pid = int(log_lines(steady_log)[1].split()[1])

    assert pid_alive(steady_pid)  # the crashes took nothing else down
    assert not honcho.has_line("sending SIGTERM")

    honcho.process.send_signal(signal.SIGINT)  # Ctrl-C

    assert honcho.process.wait(timeout=15) == 130
    # The wrappers pass honcho's SIGTERM on; the command may log it just after honcho has gone.
    wait_for(lambda: log_lines(steady_log)[-1] == "stopped by SIGTERM", timeout=10, what="the steady process's stop")
    wait_for(lambda: not pid_alive(steady_pid), timeout=10, what="the steady process to exit")

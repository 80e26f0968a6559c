"""Keep one process of `make run` running: restart it when it exits on its own, stop it when asked.

honcho, which starts the Procfile, stops every process as soon as one of them exits, so a crashed
Celery worker would take the web server and beat down with it. Each Procfile line therefore runs its
command under this wrapper:

    python -m memsite.keep_running --name worker -- .venv/bin/celery -A memsite worker

- When the command exits on its own (a crash, or an exit nobody asked for), a line on stderr says so
  ("worker exited with code 1; restart 3 in 4 s") and it starts again after a delay that doubles
  from 1 s to at most 30 s, and falls back to 1 s once a run has lasted a minute.
- On SIGINT or SIGTERM (honcho's stop after Ctrl-C) the signal goes to the command's process group;
  the wrapper exits with the command's status once it has exited, and kills the group if it is
  still there after `--stop-timeout` seconds (within honcho's own 5 s before it kills).
- A command that cannot be started at all (a wrong path) is not retried: exit status 127.

The command runs in its own process group, so a stop reaches it (and its own children: gunicorn's
and Celery's pool processes) once, from here; on Linux it is also killed if this wrapper is.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType

FIRST_DELAY = 1.0
MAX_DELAY = 30.0
# A run this long means the command was working: its next exit starts the delays again from 1 s.
STABLE_AFTER = 60.0
DEFAULT_STOP_TIMEOUT = 4.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def restart_delay(exits_in_a_row: int) -> float:
    return min(FIRST_DELAY * 2 ** (exits_in_a_row - 1), MAX_DELAY)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"


def exit_status(returncode: int) -> int:
    """The status a shell reports for `returncode`: 128 + n for a death by signal n."""
    return 128 - returncode if returncode < 0 else returncode


def report(line: str) -> None:
    print(f"keep_running: {line}", file=sys.stderr, flush=True)


def die_with_parent() -> Callable[[], None] | None:
    """What the child runs before its command so that the kernel kills it when this wrapper dies,
    even by SIGKILL (honcho's last resort), rather than leaving it running with no one to stop it."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def in_child() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the wrapper died before prctl took effect
            os._exit(1)

    return in_child


class Supervisor:
    def __init__(self, command: Sequence[str], name: str, stop_timeout: float) -> None:
        self.command = list(command)
        self.name = name
        self.stop_timeout = stop_timeout
        self.stop_requested = threading.Event()
        self.stop_signal = signal.SIGTERM
        self.child: subprocess.Popen[bytes] | None = None

    def run(self) -> int:
        """Run the command until asked to stop; the wrapper's exit status."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_stop_signal)
        restarts = exits_in_a_row = 0
        while not self.stop_requested.is_set():
            started = time.monotonic()
            try:
                self.child = subprocess.Popen(self.command, process_group=0, preexec_fn=die_with_parent())  # noqa: S603
            except OSError as exc:
                report(f"{self.name} cannot be started, not retrying: {exc}")
                return 127
            if self.stop_requested.is_set():  # asked while it was being started
                self._forward(self.stop_signal)
            returncode = self.child.wait()
            if self.stop_requested.is_set():
                return exit_status(returncode)
            exits_in_a_row = 1 if time.monotonic() - started >= STABLE_AFTER else exits_in_a_row + 1
            restarts += 1
            delay = restart_delay(exits_in_a_row)
            report(f"{self.name} {describe_exit(returncode)}; restart {restarts} in {delay:g} s")
            self.stop_requested.wait(delay)
        return 128 + self.stop_signal

    def _on_stop_signal(self, signum: int, _frame: FrameType | None) -> None:
        if not self.stop_requested.is_set():
            self.stop_signal = signal.Signals(signum)
            self.stop_requested.set()
            # A timer, not a timed wait: the main thread blocks in wait() without polling.
            timer = threading.Timer(self.stop_timeout, self._kill_leftovers)
            timer.daemon = True  # the wrapper's exit must not wait for it
            timer.start()
        self._forward(signum)  # a second Ctrl-C is passed on too (Celery's cold shutdown)

    def _forward(self, signum: int) -> None:
        child = self.child
        if child is not None and child.returncode is None:
            try:
                os.killpg(child.pid, signum)
            except ProcessLookupError:
                pass  # it exited meanwhile

    def _kill_leftovers(self) -> None:
        if self.child is not None and self.child.returncode is None:
            report(f"{self.name} still running {self.stop_timeout:g} s after {self.stop_signal.name}: killing it")
            self._forward(signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memsite.keep_running",
        description="Run a command; restart it when it exits on its own; forward SIGINT/SIGTERM to it.",
    )
    parser.add_argument("--name", help="what the report lines call it (default: the program's name)")
    parser.add_argument("--stop-timeout", type=float, default=DEFAULT_STOP_TIMEOUT, help="seconds before SIGKILL")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    supervisor = Supervisor(command, args.name or os.path.basename(command[0]), args.stop_timeout)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())

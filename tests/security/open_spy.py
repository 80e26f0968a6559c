"""Which files the process opens, seen through Python's audit hooks (PEP 578).

Every `open()`, `io.open`, `os.open`, `pathlib.Path.open` and the C-level file opens Python
makes raise the "open" audit event, so this sees more than patching `builtins.open` would.
A hook cannot be removed, so one recorder is installed once and switched on per block.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_recording: list[list[str]] = []


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _recording or not args:
        return
    path = args[0]
    if isinstance(path, int):  # os.fdopen of a descriptor: nothing was looked up by name
        return
    name = os.fsdecode(path) if isinstance(path, bytes | os.PathLike) else str(path)
    with _lock:
        for opened in _recording:
            opened.append(name)


sys.addaudithook(_hook)


@contextmanager
def files_opened() -> Iterator[list[str]]:
    opened: list[str] = []
    with _lock:
        _recording.append(opened)
    try:
        yield opened
    finally:
        with _lock:
            _recording.remove(opened)

"""Memory-file paths and the text the memory tool answers with.

Path rules: every path is `/memories` or below it, made of plain names. A path that could climb
out (`..`), hide (`.name`), smuggle a second meaning (`\\`, NUL, control or format characters,
`//`) or grow without bound (long names, deep trees) is refused with the reason, so an agent's
model learns what to send instead.

The answers use the wording of the Anthropic SDK's reference memory tool (anthropic.lib.tools,
BetaLocalFilesystemMemoryTool), so a model reads from memsite what it would read from files.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from memsite.errors import InvalidInput

ROOT = "/memories"
# The agent records of the team, as read-only files in every tree (memory_files.selectors).
RECORDS_DIR = f"{ROOT}/agent-records"
RECORD_FILE_NAME = "agent-memory.yaml"
MAX_NAME_CHARS = 100
# Within the database's index limits whatever the characters (4 bytes each in UTF-8).
MAX_PATH_CHARS = 512
# Characters no file name holds on some system: refused, so a tree exports anywhere.
FORBIDDEN_NAME_CHARACTERS = frozenset('\\:*?"<>|')
LINE_NUMBER_WIDTH = 6  # the SDK's: len(str(999999))
# A directory's size in a listing: what a filesystem shows for one (4K in the reference tool's listing).
DIRECTORY_SIZE = 4096
LISTING_DEPTH = 2


@dataclass(frozen=True)
class MemoryPath:
    text: str  # "/memories/notes/todo.md", no trailing slash

    @property
    def names(self) -> list[str]:
        """The names below /memories ([] for the root)."""
        return self.text[len(ROOT) + 1 :].split("/") if self.text != ROOT else []

    @property
    def is_root(self) -> bool:
        return self.text == ROOT

    def contains(self, other: str) -> bool:
        """`other` is this directory or lies below it."""
        return other == self.text or other.startswith(self.text + "/")


def _name_problem(name: str) -> str | None:
    if name in ("", ".", ".."):
        return "may not contain '..', '.' or an empty name ('//')"
    if name.startswith("."):
        return f"may not contain a hidden name (starting with '.'): {name[:40]!r}"
    if len(name) > MAX_NAME_CHARS:
        return f"has a name longer than {MAX_NAME_CHARS} characters"
    if name != name.strip():
        return f"has a name that starts or ends with a space: {name[:40]!r}"
    for char in name:
        if char == "\x00":
            return "may not contain a NUL character"
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            return f"may not contain a control or invisible character (U+{ord(char):04X})"
        if char in FORBIDDEN_NAME_CHARACTERS:
            return f"may not contain {char!r}"
    return None


def agent_problem(agent: str) -> str | None:
    """Why an owner's name is refused (the name rules of a path, and no '/'), or None."""
    return "may not contain '/'" if "/" in agent else _name_problem(agent)


def parse_path(value: object, *, field: str = "path", directory: bool = False) -> MemoryPath:
    """The path `value` names, or InvalidInput naming `field` and the rule it breaks. A trailing
    slash is allowed (and dropped) where a directory is meant."""
    if not isinstance(value, str) or not value:
        raise InvalidInput.for_field(field, "This field is required: a path under /memories.")
    text = value
    if len(text) > MAX_PATH_CHARS:
        raise InvalidInput.for_field(field, f"is longer than {MAX_PATH_CHARS} characters")
    if text != ROOT and not text.startswith(ROOT + "/"):
        raise InvalidInput.for_field(field, f"must start with {ROOT}/ (got {text[:60]!r})")
    if "\\" in text:
        raise InvalidInput.for_field(field, "may not contain a backslash")
    if directory and text.endswith("/") and text != ROOT + "/":
        text = text[:-1]
    if text == ROOT + "/":
        text = ROOT
    path = MemoryPath(text)
    for name in path.names:
        problem = _name_problem(name)
        if problem:
            raise InvalidInput.for_field(field, problem)
    if len(path.names) > settings.MEMORY_FILE_MAX_DEPTH:
        raise InvalidInput.for_field(
            field, f"is {len(path.names)} levels deep; at most {settings.MEMORY_FILE_MAX_DEPTH} below {ROOT}"
        )
    return path


def file_path(value: object, *, field: str = "path") -> MemoryPath:
    """A path that names a file: not the root."""
    path = parse_path(value, field=field)
    if path.is_root:
        raise InvalidInput.for_field(field, f"names the {ROOT} directory, not a file")
    return path


def is_record_path(path: str) -> bool:
    return path == RECORDS_DIR or path.startswith(RECORDS_DIR + "/")


def record_path(*, session_id: str, agent: str) -> str:
    return f"{RECORDS_DIR}/{session_id}/{agent}/{RECORD_FILE_NAME}"


def byte_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


# --- the answers -----------------------------------------------------------------------------


def format_size(size: int) -> str:
    """1.5K, 4K, 12B: the reference tool's sizes."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    index = min((size.bit_length() - 1) // 10, len(units) - 1)
    scaled = size / (1024**index)
    return f"{int(scaled)}{units[index]}" if scaled == int(scaled) else f"{scaled:.1f}{units[index]}"


def listing_text(path: MemoryPath, entries: Sequence[tuple[int, str]]) -> str:
    """A directory's listing: (size, path relative to it, a trailing / for a directory) each."""
    header = (
        f"Here're the files and directories up to {LISTING_DEPTH} levels deep in {path.text}, excluding hidden items:"
    )
    lines = [f"{format_size(DIRECTORY_SIZE)}\t{path.text}"]
    lines += [f"{format_size(size)}\t{path.text}/{relative}" for size, relative in entries]
    return header + "\n" + "\n".join(lines)


def listing_entries(path: MemoryPath, files: Sequence[tuple[str, int]]) -> list[tuple[int, str]]:
    """What a listing of `path` shows of these (file path, size) below it: every directory and
    file within LISTING_DEPTH levels, sorted by name as the reference tool walks them."""
    shown: dict[str, int] = {}
    for file_text, size in files:
        if not path.contains(file_text) or file_text == path.text:
            continue
        relative = file_text[len(path.text) + 1 :].split("/")
        for depth in range(1, min(len(relative), LISTING_DEPTH) + 1):
            is_file = depth == len(relative)
            key = "/".join(relative[:depth]) + ("" if is_file else "/")
            shown[key] = size if is_file else DIRECTORY_SIZE
    return [(size, name) for name, size in sorted(shown.items(), key=lambda item: item[0].rstrip("/").split("/"))]


def numbered(lines: Sequence[str], first: int) -> str:
    return "\n".join(f"{str(number).rjust(LINE_NUMBER_WIDTH)}\t{line}" for number, line in enumerate(lines, first))


def file_text(path: str, content: str, view_range: Sequence[int] | None = None) -> str:
    """A file with line numbers, all of it or `view_range` [first, last] (last -1: to the end)."""
    lines = content.split("\n")
    first = 1
    if view_range:
        first = max(1, view_range[0])
        last = len(lines) if view_range[1] == -1 else view_range[1]
        lines = lines[first - 1 : last]
    return f"Here's the content of {path} with line numbers:\n" + numbered(lines, first)


def view_range_problem(view_range: Sequence[int], line_count: int) -> str | None:
    first, last = view_range
    if first < 1 or first > max(line_count, 1):
        return f"first line {first} is outside the file's lines [1, {line_count}]"
    if last != -1 and last < first:
        return f"last line {last} is before the first line {first} (use -1 for the end of the file)"
    return None


def edited_snippet(content: str, changed_line: int) -> str:
    """The reference tool's answer to a str_replace: two lines around the change, numbered."""
    lines = content.split("\n")
    start, end = max(0, changed_line - 2), min(len(lines), changed_line + 3)
    return "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n" + numbered(
        lines[start:end], start + 1
    )


def matching_lines(content: str, needle: str) -> list[int]:
    """The line on which each occurrence of `needle` starts."""
    found, start = [], 0
    while (position := content.find(needle, start)) != -1:
        found.append(content[:position].count("\n") + 1)
        start = position + 1
    return found


def split_lines(content: str) -> list[str]:
    """Lines on LF, without the empty tail a trailing newline leaves (the reference insert's)."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def inserted(content: str, line: int, text: str) -> str:
    lines = split_lines(content)
    lines.insert(line, text.rstrip("\n"))
    joined = "\n".join(lines)
    return joined if joined.endswith("\n") else joined + "\n"


def unified_diff(before: str, after: str, *, old_path: str, new_path: str) -> str:
    # Lines compared without their ends, so a last line with no newline diffs like the others.
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), fromfile=old_path, tofile=new_path, lineterm=""
    )
    return "\n".join(lines)

"""Experience files (handcrafted_exp_*.yaml), and zip archives of them. Pure: no Django import.

The experience file format: one file per experience, named `handcrafted_exp_{anything}.yaml`
(the loader globs `handcrafted_exp_*.yaml`, so `.yml` is not an experience file), holding

    exp_id: file-validation
    who:
      - CodeInterpreter
    when: |
      Use when user requests file operations or FileNotFoundError occurred.
    what: |
      Always check os.path.exists() before reading files.

`who` lists target roles (empty = every role); a legacy `experience_text` fills both `when` and
`what`. Files come from users, so they are read with `yaml.safe_load` semantics only, under size
limits, and every problem is a FileError naming the file and, where known, the line: one bad file
never stops an import of the rest. `dump_experience_file` writes the same format back, and
parse(dump(x)) == x for every ExperienceData parse can return, so export -> import round-trips.
"""

from __future__ import annotations

import io
import os
import re
import unicodedata
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from django.core.files.uploadedfile import UploadedFile

from memsite.errors import InvalidInput
from memsite.parsers import text_problem
from memsite.safe_yaml import BoundedSafeLoader

MAX_FILE_BYTES = 64 * 1024  # a handcrafted experience is a few lines; this bounds parse cost
MAX_TEXT_CHARS = 20_000  # per `when` / `what`: both must fit a prompt
MAX_ROLES = 50
MAX_ROLE_CHARS = 100
EXP_ID_MAX_LENGTH = 100
# A slug (Django's validate_slug alphabet) starting with a letter or digit: it names files
# (`handcrafted_exp_{exp_id}.yaml`) and is matched in LLM answers, so no spaces or punctuation.
EXP_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
FILE_NAME_PATTERN = re.compile(r"handcrafted_exp_[^/\\]*\.yaml")  # the experience loader's glob, nothing more
MAX_ZIP_MEMBERS = 5_000
MAX_ZIP_TOTAL_BYTES = 32 * 1024 * 1024  # uncompressed bytes actually read from one archive
ZIP_TIMESTAMP = (1980, 1, 1, 0, 0, 0)  # the earliest zip date: a fixed one makes archives reproducible

FIELDS = ("exp_id", "who", "when", "what")
LEGACY_TEXT_FIELD = "experience_text"
_KNOWN_KEYS = frozenset((*FIELDS, LEGACY_TEXT_FIELD))
# YAML reads all of these as line breaks, so text keeps only "\n" to survive a dump/load cycle.
_LINE_BREAKS = re.compile(r"\r\n|[\r\x85\u2028\u2029]")


@dataclass(frozen=True)
class ExperienceData:
    exp_id: str
    who: list[str]  # empty = every role
    when: str  # the selection criteria the selecting LLM reads
    what: str  # the instructions injected into the role's prompt


@dataclass(frozen=True)
class FileError:
    name: str
    line: int | None  # 1-based; None when the problem is the file as a whole
    message: str

    def __str__(self) -> str:
        where = f"{self.name}, line {self.line}" if self.line is not None else self.name
        return f"{where}: {self.message}"


class ExperienceFileError(ValueError):
    """One file that cannot be imported; `error` says which, where and why."""

    def __init__(self, error: FileError) -> None:
        super().__init__(str(error))
        self.error = error


class ExperienceValidationError(ValueError):
    """Field values that break the rules; `fields` maps each field to its messages (for forms)."""

    def __init__(self, fields: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{name}: {msg}" for name, msgs in fields.items() for msg in msgs))
        self.fields = fields


class ZipArchiveError(ValueError):
    """The archive as a whole is unusable (not a zip, too many members, too large, encrypted)."""


# --- validation shared by files, forms and the API --------------------------------------------


def is_experience_file_name(name: str) -> bool:
    return FILE_NAME_PATTERN.fullmatch(name) is not None


def exp_id_problem(exp_id: Any) -> str | None:
    """Why this is not a usable exp_id, or None."""
    if not isinstance(exp_id, str):
        # `exp_id: 007` would load as the integer 7: refusing beats silently renaming it.
        return f"must be text, not {_yaml_type(exp_id)} (quote it)"
    if not exp_id:
        return "must not be empty"
    if len(exp_id) > EXP_ID_MAX_LENGTH:
        return f"is longer than {EXP_ID_MAX_LENGTH} characters"
    if not EXP_ID_PATTERN.fullmatch(exp_id):
        return "must be a slug: letters, digits, '-' and '_', starting with a letter or digit"
    return None


def clean_text(text: str) -> str:
    """The stored form of `when`/`what`: "\\n" line breaks, no trailing blanks on lines or ends.

    Trailing blanks cannot be written in a YAML block scalar, and experience files put text in
    block scalars, so removing them keeps exported files in the experience file format.
    """
    lines = _LINE_BREAKS.sub("\n", text).split("\n")
    return "\n".join(line.rstrip() for line in lines).strip()


def validate_experience(*, exp_id: Any, who: Any, when: Any, what: Any) -> ExperienceData:
    """The ExperienceData these values make (texts cleaned, roles trimmed), or every problem at once."""
    problems: dict[str, list[str]] = {}
    id_problem = exp_id_problem(exp_id)
    if id_problem:
        problems["exp_id"] = [id_problem]
    roles, role_problems = _roles(who)
    if role_problems:
        problems["who"] = role_problems
    texts: dict[str, str] = {}
    for field, value in (("when", when), ("what", what)):
        text, problem = _text(value)
        if problem:
            problems[field] = [problem]
        texts[field] = text
    if problems:
        raise ExperienceValidationError(problems)
    return ExperienceData(exp_id=exp_id, who=roles, when=texts["when"], what=texts["what"])


def _roles(who: Any) -> tuple[list[str], list[str]]:
    # `who`: a list of roles; a single string is one role; missing/null/empty means all roles.
    if who is None or who == "":
        return [], []
    items = [who] if isinstance(who, str) else who
    if not isinstance(items, list):
        return [], [f"must be a list of role names, not {_yaml_type(who)}"]
    if len(items) > MAX_ROLES:
        return [], [f"lists more than {MAX_ROLES} roles"]
    roles: list[str] = []
    problems: list[str] = []
    for index, item in enumerate(items, start=1):
        if not isinstance(item, str):
            problems.append(f"role {index} is {_yaml_type(item)}, not text")
            continue
        role = item.strip()
        if not role:
            problems.append(f"role {index} is empty")
        elif len(role) > MAX_ROLE_CHARS:
            problems.append(f"role {index} is longer than {MAX_ROLE_CHARS} characters")
        elif _has_control(role, allowed=""):
            problems.append(f"role {index} contains a control character")
        elif text_problem(role):
            problems.append(f"role {index} is {text_problem(role)}")
        elif role not in roles:  # a repeated role adds nothing
            roles.append(role)
    return roles, problems


def _text(value: Any) -> tuple[str, str | None]:
    if value is None:
        return "", "is required"
    if not isinstance(value, str):
        return "", f"must be text, not {_yaml_type(value)}"
    text = clean_text(value)
    if not text:
        return "", "must not be empty"
    if len(text) > MAX_TEXT_CHARS:
        return "", f"is longer than {MAX_TEXT_CHARS} characters"
    if _has_control(text, allowed="\n\t"):
        # NUL cannot be stored in PostgreSQL text, and the others are invisible in every editor.
        return "", "contains a control character"
    return text, text_problem(text)  # a lone surrogate (YAML's "\ud800") cannot be stored


def _has_control(text: str, *, allowed: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" and ch not in allowed for ch in text)


def _yaml_type(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "text", list: "a list", dict: "a mapping"}
    return names.get(type(value), f"a {type(value).__name__}")


# --- reading files ---------------------------------------------------------------------------


def parse_experience_file(name: str, data: bytes) -> ExperienceData:
    """The experience one file holds, or ExperienceFileError naming the file and line."""
    return _parse(name, data)[0]


def parse_experience_files(
    files: Iterable[tuple[str, bytes]],
) -> tuple[list[tuple[str, ExperienceData]], list[FileError]]:
    """Every good file's experience (in the given order) and every bad file's error.

    The experience loader dedupes by exp_id; here the first file with an exp_id wins and a later one
    is rejected naming the first, so a duplicate is reported rather than silently dropped.
    """
    parsed: list[tuple[str, ExperienceData]] = []
    errors: list[FileError] = []
    first_file: dict[str, str] = {}
    seen_names: set[str] = set()
    for name, data in files:
        if name in seen_names:  # two archive folders holding the same base name
            errors.append(FileError(name, None, "another file with this name came earlier in the import"))
            continue
        seen_names.add(name)
        try:
            exp, id_line = _parse(name, data)
        except ExperienceFileError as exc:
            errors.append(exc.error)
            continue
        if exp.exp_id in first_file:
            message = f"duplicate exp_id {exp.exp_id!r}: already defined by {first_file[exp.exp_id]}"
            errors.append(FileError(name, id_line, message))
            continue
        first_file[exp.exp_id] = name
        parsed.append((name, exp))
    return parsed, errors


def _parse(name: str, data: bytes) -> tuple[ExperienceData, int | None]:
    """The experience and the line of its exp_id (for duplicate reports)."""

    def fail(message: str, line: int | None = None) -> ExperienceFileError:
        return ExperienceFileError(FileError(name, line, message))

    if not is_experience_file_name(name):
        raise fail("not an experience file: the name must match handcrafted_exp_*.yaml")
    if len(data) > MAX_FILE_BYTES:
        raise fail(f"the file has {len(data)} bytes (limit {MAX_FILE_BYTES})")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise fail(f"the file is not UTF-8 text (byte {exc.start})") from exc
    root, value = _load(text, fail)
    if value is None:
        raise fail("the file is empty")
    if not isinstance(value, dict) or not isinstance(root, yaml.MappingNode):
        raise fail(f"the file must hold a mapping of {', '.join(FIELDS)}, not {_yaml_type(value)}", 1)
    lines = _key_lines(root, fail)
    unknown = sorted(str(key) for key in value if key not in _KNOWN_KEYS)
    if unknown:
        line = min(lines.get(str(key), 1) for key in unknown)
        raise fail(f"unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(FIELDS)}", line)
    when, what = value.get("when"), value.get("what")
    if LEGACY_TEXT_FIELD in value:
        if "when" in value or "what" in value:
            legacy_line = lines.get(LEGACY_TEXT_FIELD)
            raise fail(f"{LEGACY_TEXT_FIELD!r} (legacy) cannot be combined with 'when'/'what'", legacy_line)
        # Backward compatibility (`experience_text`): the legacy text is both the criteria and the instructions.
        when = what = value[LEGACY_TEXT_FIELD]
    if "exp_id" not in value:
        raise fail("'exp_id' is required", 1)
    try:
        exp = validate_experience(exp_id=value["exp_id"], who=value.get("who"), when=when, what=what)
    except ExperienceValidationError as exc:
        # Problems in when/what of a legacy file are problems of its experience_text.
        legacy = LEGACY_TEXT_FIELD in value
        sources = {LEGACY_TEXT_FIELD if legacy and f in ("when", "what") else f: m for f, m in exc.fields.items()}
        message = "; ".join(f"{source!r} {msg}" for source, msgs in sources.items() for msg in msgs)
        raise fail(message, lines.get(next(iter(sources)))) from exc
    return exp, lines.get("exp_id")


def _load(text: str, fail: Any) -> tuple[yaml.Node | None, Any]:
    """The root node (for line numbers) and the value `yaml.safe_load` would return."""
    loader = BoundedSafeLoader(text)
    try:
        root = loader.get_single_node()
        value = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise fail(f"invalid YAML: {problem}", mark.line + 1 if mark else None) from exc
    except yaml.YAMLError as exc:  # e.g. a character YAML does not allow in a stream
        raise fail(f"invalid YAML: {exc}") from exc
    except RecursionError as exc:
        raise fail("invalid YAML: nested too deeply") from exc
    finally:
        loader.dispose()
    return root, value


def _key_lines(root: yaml.MappingNode, fail: Any) -> dict[str, int]:
    """Each top-level key's 1-based line; a repeated key is an error (safe_load keeps the last silently)."""
    lines: dict[str, int] = {}
    for key_node, _ in root.value:
        key = str(key_node.value)
        if key in lines:
            raise fail(f"key {key!r} appears twice (first on line {lines[key]})", key_node.start_mark.line + 1)
        lines[key] = key_node.start_mark.line + 1
    return lines


# --- writing files ---------------------------------------------------------------------------


class _BlockText(str):
    """Text to write as a `|` block scalar, as experience files do."""


class _SeedDumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Experience files indent list items under their key ("who:\n  - Role"); PyYAML would not.
        super().increase_indent(flow, False)


def _represent_block(dumper: yaml.SafeDumper, text: _BlockText) -> yaml.ScalarNode:
    # The trailing "\n" makes PyYAML write `|` (not `|-`), like experience files; clean_text strips it on
    # load. Text a block cannot hold (e.g. leading blanks on the first line) falls back to quotes.
    return dumper.represent_scalar("tag:yaml.org,2002:str", f"{text}\n", style="|")


_SeedDumper.add_representer(_BlockText, _represent_block)


def experience_file_name(exp_id: str) -> str:
    return f"handcrafted_exp_{exp_id}.yaml"


def dump_experience_file(exp: ExperienceData) -> tuple[str, bytes]:
    """The file name and UTF-8 bytes of one experience in the experience file format.

    The input is validated first (it may come from the database, written before a rule), so the
    file always parses back to the same ExperienceData.
    """
    clean = validate_experience(exp_id=exp.exp_id, who=exp.who, when=exp.when, what=exp.what)
    document = {  # insertion order is the file's key order (sort_keys=False)
        "exp_id": clean.exp_id,
        "who": list(clean.who),
        "when": _BlockText(clean.when),
        "what": _BlockText(clean.what),
    }
    text = yaml.dump(
        document,
        Dumper=_SeedDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=10_000,  # never fold a long quoted line: folding makes diffs noisy
    )
    return experience_file_name(clean.exp_id), text.encode("utf-8")


# --- zip archives ----------------------------------------------------------------------------


def read_zip(data: bytes) -> list[tuple[str, bytes]]:
    """The files of an uploaded archive as (base name, bytes), sorted by name then archive order.

    Only base names are kept (folders inside the archive mean nothing, and `../x` cannot reach
    anywhere); folders, hidden files and macOS `__MACOSX/` metadata are skipped. A member larger
    than MAX_FILE_BYTES is read only to MAX_FILE_BYTES + 1 bytes, enough for the parser to reject
    it, so a zip bomb costs at most that per member.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise ZipArchiveError(f"not a readable zip archive ({exc})") from exc
    with archive:
        members = archive.infolist()
        if len(members) > MAX_ZIP_MEMBERS:
            raise ZipArchiveError(f"the archive has {len(members)} members (limit {MAX_ZIP_MEMBERS})")
        files: list[tuple[str, bytes]] = []
        total = 0
        for member in members:
            path = member.filename.replace("\\", "/")
            base = path.rsplit("/", 1)[-1]
            if member.is_dir() or not base or base.startswith(".") or path.startswith("__MACOSX/"):
                continue
            if member.flag_bits & 0x1:
                raise ZipArchiveError(f"{base}: encrypted archives are not supported")
            try:
                with archive.open(member) as handle:
                    content = handle.read(MAX_FILE_BYTES + 1)
            except (zipfile.BadZipFile, NotImplementedError, zlib.error, EOFError, OSError) as exc:
                raise ZipArchiveError(f"{base}: cannot be read from the archive ({exc})") from exc
            total += len(content)
            if total > MAX_ZIP_TOTAL_BYTES:
                raise ZipArchiveError(f"the archive holds more than {MAX_ZIP_TOTAL_BYTES} bytes")
            files.append((base, content))
    files.sort(key=lambda item: item[0])  # stable: same-name members keep archive order
    return files


def write_zip(files: list[tuple[str, bytes]]) -> bytes:
    """A deterministic archive: members sorted by name, fixed timestamps and permissions."""
    names = [name for name, _ in files]
    if len(set(names)) != len(names):
        raise ValueError("duplicate file names in the archive")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in sorted(files, key=lambda item: item[0]):
            if "/" in name or "\\" in name or not name or name in (".", ".."):
                raise ValueError(f"{name!r} is not a plain file name")
            info = zipfile.ZipInfo(name, date_time=ZIP_TIMESTAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, whatever machine writes it
            info.external_attr = 0o644 << 16
            archive.writestr(info, content)
    return buffer.getvalue()


def uploaded_experience_files(upload: UploadedFile) -> list[tuple[str, bytes]]:
    """An upload as (file name, bytes): a zip's experience files, or the file itself (read to a bound
    the parser rejects, so an oversized file costs no more than that)."""
    name = os.path.basename(upload.name or "")
    if not name.lower().endswith(".zip"):
        return [(name, upload.read(MAX_FILE_BYTES + 1))]
    if upload.size and upload.size > MAX_ZIP_TOTAL_BYTES:
        raise InvalidInput.for_field("archive", f"{name} is larger than {MAX_ZIP_TOTAL_BYTES} bytes")
    try:
        return read_zip(upload.read())
    except ZipArchiveError as exc:
        raise InvalidInput.for_field("archive", f"{name}: {exc}") from exc

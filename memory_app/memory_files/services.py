"""The memory tool's six commands over a team's memory files, and revert.

Each change takes the file's row lock, writes the new text and one MemoryFileVersion (the whole
text after it and the unified diff), and brings the file's search entry up to date, in one
transaction. Refusals raise before anything is written: a refused command changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory_app.memory_files import documents, selectors
from memory_app.memory_files.documents import MemoryPath
from memory_app.memory_files.models import MemoryFile, MemoryFileVersion
from memory_app.search import services as search_index
from memory_app.search.models import SearchKind
from memory_app.tenancy.models import Team
from memsite.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge

COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
READ_COMMANDS = frozenset({"view"})
Action = MemoryFileVersion.Action


class Command(TypedDict, total=False):
    """One memory-tool command, with the Anthropic memory tool's parameter names."""

    command: str
    path: str
    file_text: str
    old_str: str
    new_str: str
    insert_line: int
    insert_text: str
    view_range: list[int]
    old_path: str
    new_path: str


@dataclass(frozen=True)
class Answer:
    command: str
    path: str
    output: str  # what the tool returns to the model
    version: int | None  # the file's version after the command (None: no one file changed)


@dataclass(frozen=True)
class Owner:
    """Whose tree: the team and the agent ("" for the team's shared files), and who is acting."""

    team: Team
    agent: str
    author: str


def memory_file_command(*, owner: Owner, command: Command) -> Answer:
    name = command.get("command", "")
    if name == "view":
        return _view(owner, command)
    if name == "create":
        return _create(owner, command)
    if name == "str_replace":
        return _str_replace(owner, command)
    if name == "insert":
        return _insert(owner, command)
    if name == "delete":
        return _delete(owner, command)
    if name == "rename":
        return _rename(owner, command)
    raise InvalidInput.for_field("command", f"must be one of {', '.join(COMMANDS)}")


# --- view ----------------------------------------------------------------------------------


def _view(owner: Owner, command: Command) -> Answer:
    path = documents.parse_path(command.get("path"), directory=True)
    view_range = command.get("view_range")
    found = None if path.is_root else selectors.memory_file_find(team=owner.team, agent=owner.agent, path=path.text)
    text = found.content if found is not None else selectors.record_file_text(team=owner.team, path=path)
    if text is not None:
        if view_range:
            problem = documents.view_range_problem(view_range, len(text.split("\n")))
            if problem:
                raise InvalidInput.for_field("view_range", problem)
        output = documents.file_text(path.text, text, view_range)
        return Answer("view", path.text, output, found.version if found is not None else None)
    files = _tree_under(owner, path)
    if not files and not path.is_root:
        raise NotFound(f"The path {path.text} does not exist. Please provide a valid path.")
    return Answer("view", path.text, documents.listing_text(path, documents.listing_entries(path, files)), None)


def _tree_under(owner: Owner, path: MemoryPath) -> list[tuple[str, int]]:
    """(path, size) of the owner's files and the agent records at or below `path`; a record's
    size is rendered only where the listing shows the file itself."""
    files = [
        (row.path, row.size)
        for row in selectors.live_files(team=owner.team, agent=owner.agent)
        .filter(selectors.under(path))
        .only("path", "size")
    ]
    if path.is_root or documents.is_record_path(path.text):
        records = selectors.record_files(team=owner.team, under_path=path)
        shown = [r for r in records if len(r.path.split("/")) - len(path.text.split("/")) <= documents.LISTING_DEPTH]
        sizes = dict(selectors.record_sizes(team=owner.team, records=shown))
        files += [(record.path, sizes.get(record.path, 0)) for record in records]
    return files


# --- changes -------------------------------------------------------------------------------


def _writable(path: MemoryPath, field: str = "path") -> MemoryPath:
    if documents.is_record_path(path.text):
        raise InvalidInput.for_field(
            field,
            f"is read-only: {documents.RECORDS_DIR} shows the agent records, which are written "
            "through the agent-memory API",
        )
    return path


def _text(command: Command, field: str) -> str:
    value = command.get(field)
    if not isinstance(value, str):
        raise InvalidInput.for_field(field, "This field is required.")
    return value


def _check_size(path: str, content: str) -> int:
    size = documents.byte_size(content)
    if size > settings.MEMORY_FILE_MAX_BYTES:
        raise PayloadTooLarge(
            f"File {path} would be {size} bytes; a memory file holds at most {settings.MEMORY_FILE_MAX_BYTES}.",
            fields={"path": [f"at most {settings.MEMORY_FILE_MAX_BYTES} bytes"]},
        )
    return size


def _record(
    *, owner: Owner, file: MemoryFile, action: str, before: str, before_path: str, content: str
) -> MemoryFileVersion:
    diff = documents.unified_diff(before, content, old_path=before_path, new_path=file.path)
    version = MemoryFileVersion.objects.create(
        team=owner.team,
        file=file,
        version=file.version,
        action=action,
        path=file.path,
        content=content,
        diff=diff,
        author=owner.author,
    )
    if file.deleted_at is None:
        search_index.index_memory_file(file=file)
    else:
        search_index.index_forget(team_id=owner.team.pk, kind=SearchKind.MEMORY_FILE, source_keys=[str(file.pk)])
    return version


def _locked(owner: Owner, path: str) -> MemoryFile:
    found = selectors.live_files(team=owner.team, agent=owner.agent).select_for_update().filter(path=path).first()
    if found is None:
        raise NotFound(f"The path {path} does not exist. Please provide a valid path.")
    return found


def _check_no_directory(owner: Owner, path: MemoryPath, field: str) -> None:
    """A file may not take the name of a directory (a file of the owner lies below it), nor lie
    below a file."""
    files = selectors.live_files(team=owner.team, agent=owner.agent)
    if files.filter(path__startswith=path.text + "/").exists():
        raise Conflict(f"The path {path.text} is a directory", fields={field: ["names a directory"]})
    parents = ["/".join([documents.ROOT, *path.names[:depth]]) for depth in range(1, len(path.names))]
    if parents and files.filter(path__in=parents).exists():
        raise Conflict(f"A parent of {path.text} is a file", fields={field: ["lies below a file"]})


def _check_file_count(owner: Owner, adding: int = 1) -> None:
    count = MemoryFile.objects.filter(team=owner.team, deleted_at__isnull=True).count()
    if count + adding > settings.MEMORY_FILE_MAX_FILES:
        raise PayloadTooLarge(
            f"The team keeps {count} memory files; at most {settings.MEMORY_FILE_MAX_FILES} (delete some first)."
        )


def _create(owner: Owner, command: Command) -> Answer:
    path = _writable(documents.file_path(command.get("path")))
    content = _text(command, "file_text")
    size = _check_size(path.text, content)
    try:
        with transaction.atomic():
            if selectors.memory_file_find(team=owner.team, agent=owner.agent, path=path.text) is not None:
                raise Conflict(f"File {path.text} already exists", fields={"path": ["already exists"]})
            _check_no_directory(owner, path, "path")
            _check_file_count(owner)
            file = MemoryFile.objects.create(
                team=owner.team, agent=owner.agent, path=path.text, content=content, size=size, updated_by=owner.author
            )
            _record(owner=owner, file=file, action=Action.CREATE, before="", before_path="/dev/null", content=content)
    except IntegrityError as exc:  # another writer created it between our check and insert
        raise Conflict(f"File {path.text} already exists", fields={"path": ["already exists"]}) from exc
    return Answer("create", path.text, f"File created successfully at: {path.text}", file.version)


def _save(owner: Owner, file: MemoryFile, content: str, *, action: str = Action.EDIT) -> None:
    before, before_path = file.content, file.path
    file.content, file.size = content, documents.byte_size(content)
    file.version += 1
    file.updated_by = owner.author
    file.save(update_fields=["content", "size", "version", "updated_by", "updated_at"])
    _record(owner=owner, file=file, action=action, before=before, before_path=before_path, content=content)


def _str_replace(owner: Owner, command: Command) -> Answer:
    path = _writable(documents.file_path(command.get("path")))
    old, new = _text(command, "old_str"), _text(command, "new_str")
    if old == "":
        raise InvalidInput.for_field("old_str", "may not be empty")
    with transaction.atomic():
        file = _locked(owner, path.text)
        lines = documents.matching_lines(file.content, old)
        if not lines:
            raise InvalidInput(
                f"No replacement was performed, old_str `{old}` did not appear verbatim in {path.text}.",
                fields={"old_str": ["did not appear verbatim in the file"]},
            )
        if len(lines) > 1:
            raise InvalidInput(
                f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
                f"{', '.join(map(str, lines))}. Please ensure it is unique",
                fields={"old_str": [f"appears {len(lines)} times (lines {', '.join(map(str, lines))})"]},
            )
        content = file.content.replace(old, new, 1)
        _check_size(path.text, content)
        _save(owner, file, content)
    output = documents.edited_snippet(content, lines[0] - 1)
    return Answer("str_replace", path.text, output, file.version)


def _insert(owner: Owner, command: Command) -> Answer:
    path = _writable(documents.file_path(command.get("path")))
    text = _text(command, "insert_text")
    line = command.get("insert_line")
    if not isinstance(line, int) or isinstance(line, bool):
        raise InvalidInput.for_field("insert_line", "This field is required: a line number (0 = before the first).")
    with transaction.atomic():
        file = _locked(owner, path.text)
        line_count = len(documents.split_lines(file.content))
        if line < 0 or line > line_count:
            raise InvalidInput(
                f"Invalid `insert_line` parameter: {line}. It should be within the range [0, {line_count}].",
                fields={"insert_line": [f"must be within [0, {line_count}]"]},
            )
        content = documents.inserted(file.content, line, text)
        _check_size(path.text, content)
        _save(owner, file, content)
    return Answer("insert", path.text, f"The file {path.text} has been edited.", file.version)


def _delete(owner: Owner, command: Command) -> Answer:
    path = _writable(documents.parse_path(command.get("path"), directory=True))
    if path.is_root:
        raise InvalidInput.for_field("path", f"Cannot delete the {documents.ROOT} directory itself")
    with transaction.atomic():
        files = list(
            selectors.live_files(team=owner.team, agent=owner.agent)
            .select_for_update()
            .filter(selectors.under(path))
            .order_by("path")
        )
        if not files:
            raise NotFound(f"The path {path.text} does not exist")
        now = timezone.now()
        for file in files:
            before = file.content
            file.deleted_at, file.version, file.updated_by = now, file.version + 1, owner.author
            file.save(update_fields=["deleted_at", "version", "updated_by", "updated_at"])
            _record(owner=owner, file=file, action=Action.DELETE, before=before, before_path=file.path, content="")
    single = files[0].version if len(files) == 1 and files[0].path == path.text else None
    return Answer("delete", path.text, f"Successfully deleted {path.text}", single)


def _rename(owner: Owner, command: Command) -> Answer:
    old = _writable(documents.parse_path(command.get("old_path"), field="old_path", directory=True), "old_path")
    new = _writable(documents.parse_path(command.get("new_path"), field="new_path", directory=True), "new_path")
    if old.is_root:
        raise InvalidInput.for_field("old_path", f"Cannot rename the {documents.ROOT} directory itself")
    if new.is_root or old.contains(new.text):
        raise InvalidInput.for_field("new_path", "may not be the directory itself or lie inside it")
    with transaction.atomic():
        files = list(
            selectors.live_files(team=owner.team, agent=owner.agent)
            .select_for_update()
            .filter(selectors.under(old))
            .order_by("path")
        )
        if not files:
            raise NotFound(f"The path {old.text} does not exist")
        live = selectors.live_files(team=owner.team, agent=owner.agent)
        if live.filter(selectors.under(new)).exists():
            raise Conflict(f"The destination {new.text} already exists", fields={"new_path": ["already exists"]})
        moved = [(file, new.text + file.path[len(old.text) :]) for file in files]
        for _, target in moved:
            documents.parse_path(target, field="new_path")  # the deepest file must still fit the rules
        _check_no_directory(owner, new, "new_path")
        for file, target in moved:
            before_path = file.path
            file.path, file.version, file.updated_by = target, file.version + 1, owner.author
            file.save(update_fields=["path", "version", "updated_by", "updated_at"])
            _record(
                owner=owner,
                file=file,
                action=Action.RENAME,
                before=file.content,
                before_path=before_path,
                content=file.content,
            )
    single = files[0].version if len(files) == 1 and files[0].path == new.text else None
    return Answer("rename", new.text, f"Successfully renamed {old.text} to {new.text}", single)


# --- the dashboard's edit, and revert -----------------------------------------------------------


def memory_file_write(*, owner: Owner, path: str, content: str, expected_version: int | None = None) -> MemoryFile:
    """Replace a file's text (the dashboard's editor), or create it. `expected_version` refuses
    the write if someone changed the file since the editor loaded it."""
    memory_path = _writable(documents.file_path(path))
    _check_size(memory_path.text, content)
    with transaction.atomic():
        file = (
            selectors.live_files(team=owner.team, agent=owner.agent)
            .select_for_update()
            .filter(path=memory_path.text)
            .first()
        )
        if file is None:
            _create(owner, {"command": "create", "path": memory_path.text, "file_text": content})
            return selectors.memory_file_get(team=owner.team, agent=owner.agent, path=memory_path.text)
        if expected_version is not None and file.version != expected_version:
            raise Conflict(
                f"{memory_path.text} changed since version {expected_version} (it is at version {file.version}).",
                fields={"version": [f"is {file.version} now"]},
            )
        if content != file.content:
            _save(owner, file, content)
    return file


def memory_file_revert(*, owner: Owner, path: str, version: int) -> MemoryFile:
    """A new version whose text (and path) is that of `version`. A deleted file comes back."""
    memory_path = _writable(documents.file_path(path))
    file = selectors.memory_file_with_history(team=owner.team, agent=owner.agent, path=memory_path.text)
    return memory_file_revert_file(owner=owner, file=file, version=version)


def memory_file_revert_file(*, owner: Owner, file: MemoryFile, version: int) -> MemoryFile:
    """memory_file_revert of one file row (the dashboard's file page: a deleted one too)."""
    with transaction.atomic():
        file = MemoryFile.objects.select_for_update().get(pk=file.pk, team=owner.team)
        target = selectors.memory_file_version_get(file=file, version=version)
        if target.action == Action.DELETE:
            raise InvalidInput.for_field("version", f"version {version} is the deletion; pick a version before it")
        if file.deleted_at is not None:
            if selectors.memory_file_find(team=owner.team, agent=owner.agent, path=target.path) is not None:
                raise Conflict(f"File {target.path} already exists", fields={"path": ["already exists"]})
            _check_file_count(owner)
        before, before_path = ("" if file.deleted_at is not None else file.content), file.path
        file.content, file.size, file.path = target.content, documents.byte_size(target.content), target.path
        file.version += 1
        file.deleted_at = None
        file.updated_by = owner.author
        try:
            with transaction.atomic():
                file.save(
                    update_fields=["content", "size", "path", "version", "deleted_at", "updated_by", "updated_at"]
                )
        except IntegrityError as exc:
            raise Conflict(f"File {target.path} already exists", fields={"path": ["already exists"]}) from exc
        _record(
            owner=owner, file=file, action=Action.REVERT, before=before, before_path=before_path, content=file.content
        )
    return file


def command_from(data: dict[str, Any], names: Sequence[str]) -> Command:
    """The fields of a validated request that a Command holds."""
    return Command(**{name: data[name] for name in names if name in data})  # type: ignore[typeddict-item]

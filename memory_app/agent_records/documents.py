"""YAML for agent memory documents: read safely, write in the agent-memory.yaml layout.

Reading keeps date-times as the text they were written as (`safe_load` would turn an
unquoted `2026-01-23T10:31:10Z` into a datetime, which JSON cannot carry and which would not
come back out the same), refuses repeated keys, and is bounded in nesting. Writing keeps key
order, indents lists under their key and writes multi-line text as `|` blocks, as agent-memory.yaml does.
"""

from __future__ import annotations

from typing import Any

import yaml

from memsite.safe_yaml import BoundedSafeLoader


class YAMLDocumentError(ValueError):
    """Text that is not a YAML document this API accepts."""


class _TextTimestampLoader(BoundedSafeLoader):
    """SafeLoader (alias-bounded) without the timestamp resolver: date-times stay strings."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} appears twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load(text: str | bytes) -> Any:
    """The value of one YAML document, or YAMLDocumentError naming the line."""
    try:
        return yaml.load(text, Loader=_TextTimestampLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1})" if mark else ""
        raise YAMLDocumentError(f"invalid YAML: {exc.problem or exc.context}{where}") from exc
    except yaml.YAMLError as exc:
        raise YAMLDocumentError(f"invalid YAML: {exc}") from exc
    except RecursionError as exc:
        raise YAMLDocumentError("invalid YAML: nested too deeply") from exc


class _SeedDumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # agent-memory.yaml indents list items under their key ("discoveries:\n  - id: ..."); PyYAML would not.
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # Multi-line text as a `|` block; PyYAML falls back to quotes for text a block cannot hold
    # (trailing blanks on a line, say), so the value always loads back unchanged.
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_SeedDumper.add_representer(str, _represent_str)


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_SeedDumper, sort_keys=False, allow_unicode=True, width=120)

"""YAML from clients, bounded: safe tags only, a size cap, and aliases that cannot explode.

`yaml.SafeLoader` already refuses `!!python/...` tags, but it happily composes a "billion
laughs" document: a few hundred bytes of anchors and aliases whose value, once walked (JSON
encoding, validation, storage), has billions of nodes. `BoundedSafeLoader` counts the nodes
every alias stands for and stops at MAX_ALIAS_NODES, and refuses an alias that contains
itself (JSON cannot hold a cycle). It also refuses nesting deeper than the JSON bodies'
MAX_BODY_DEPTH while composing, before PyYAML's recursive composer and constructor run out of
stack. Every YAML reader of the project subclasses it.
"""

from __future__ import annotations

from typing import Any

import yaml
from django.conf import settings

from memsite.errors import PayloadTooLarge
from memsite.parsers import DEPTH_PROBLEM, MAX_BODY_DEPTH

# Nodes all aliases of one document may expand to: generous for hand-written anchors
# (a shared block reused a few times), far below what a bomb needs.
MAX_ALIAS_NODES = 10_000


class BoundedSafeLoader(yaml.SafeLoader):
    def compose_document(self) -> yaml.Node | None:
        self._alias_nodes = 0
        self._expanded: dict[int, int] = {}
        self._open_anchors: list[str] = []
        self._depth = 0
        return super().compose_document()

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        is_alias = isinstance(event, yaml.AliasEvent)
        if is_alias and event.anchor in self._open_anchors:
            raise yaml.composer.ComposerError(
                None, None, f"alias *{event.anchor} refers to a node that contains it", event.start_mark
            )
        anchor = None if is_alias else getattr(event, "anchor", None)
        if anchor is not None:
            self._open_anchors.append(anchor)
        self._depth += 1
        if self._depth > MAX_BODY_DEPTH + 1:  # + 1: a scalar at the deepest allowed level
            raise yaml.composer.ComposerError(None, None, DEPTH_PROBLEM, event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open_anchors.pop()
        # PyYAML's compose_node returns a node or raises (its stub says `Node | None`).
        assert node is not None
        if is_alias:
            self._alias_nodes += self._expanded_size(node)
            if self._alias_nodes > MAX_ALIAS_NODES:
                raise yaml.composer.ComposerError(
                    None, None, f"aliases expand to more than {MAX_ALIAS_NODES} nodes", node.start_mark
                )
        return node

    def _expanded_size(self, node: yaml.Node) -> int:
        known = self._expanded.get(id(node))
        if known is not None:
            return known
        # Cycles are refused in compose_node; this guards the count against one all the same.
        self._expanded[id(node)] = MAX_ALIAS_NODES + 1
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(self._expanded_size(item) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(self._expanded_size(key) + self._expanded_size(value) for key, value in node.value)
        self._expanded[id(node)] = size
        return size


def read_body(stream: Any) -> bytes:
    """A YAML request body, refused (413) past MEMSITE_MAX_YAML_BYTES before any of it is parsed.

    PyYAML reads about a megabyte a second, so the general body cap (20 MiB) would let one
    request hold a worker for many seconds; JSON bodies keep the general cap.
    """
    limit = settings.MAX_YAML_BYTES
    data = stream.read(limit + 1) if stream is not None else b""
    if len(data) > limit:
        raise PayloadTooLarge(f"A YAML body may have at most {limit} bytes; send larger documents as JSON.")
    return data

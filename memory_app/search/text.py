"""How long texts are cut for the search index (no Django here: the benches cut texts the same way)."""

from __future__ import annotations

# A message is indexed in pieces of about this many characters (~230 tokens of agent text), cut at
# whitespace, each overlapping the previous one a little so a phrase across a cut is still found
# whole in one piece. The offline model embeds a piece's first 128 tokens (~400-500 characters);
# the whole piece is matched by words. Smaller pieces would embed every word at 1.9x the items and
# 1.7x the model time per token (bench/README.md, "Indexing throughput and lag").
CHUNK_CHARS = 1000
CHUNK_OVERLAP = 120


def chunks(text: str, size: int = CHUNK_CHARS, overlap: int = CHUNK_OVERLAP) -> list[str]:
    """`text` in pieces of at most about `size` characters, cut at whitespace where there is some."""
    text = text.strip()
    if len(text) <= size:
        return [text] if text else []
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + size // 2, end)
            end = cut if cut > start else end
        pieces.append(text[start:end].strip())
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
        space = text.find(" ", start, end)
        start = space + 1 if 0 <= space < end else start
    return [piece for piece in pieces if piece]

"""Image references accepted in messages: data URLs checked by magic bytes, or http(s) URLs.

The server never opens a path it was sent: anything that is not one of these two forms
(a filesystem path, a file: URL, ...) is refused.
"""

from __future__ import annotations

import base64
import binascii
import re
from urllib.parse import urlsplit

_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+);base64,(?P<data>[A-Za-z0-9+/=\s]*)$", re.S)
_MAGIC: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
MAX_URL_LENGTH = 2048


class ImageRejected(ValueError):
    """The image reference is not an acceptable data URL or http(s) URL."""


def _sniff(data: bytes) -> str | None:
    for mime, signatures in _MAGIC.items():
        if any(data.startswith(sig) for sig in signatures):
            if mime == "image/webp" and data[8:12] != b"WEBP":
                continue
            return mime
    return None


def validate_image_ref(ref: object, *, max_bytes: int) -> str:
    """Return the reference unchanged when acceptable, else raise ImageRejected."""
    if not isinstance(ref, str):
        raise ImageRejected("must be a string (a data URL or an http(s) URL)")
    if "\x00" in ref:
        raise ImageRejected("must not contain NUL bytes")
    if ref.startswith("data:"):
        match = _DATA_URL.match(ref)
        if not match:
            raise ImageRejected("data URL must be data:image/<type>;base64,<data>")
        mime = match.group("mime").lower()
        if mime not in _MAGIC:
            raise ImageRejected(f"unsupported image type {mime}; use png, jpeg, gif or webp")
        encoded = match.group("data")
        if len(encoded) * 3 // 4 > max_bytes:
            raise ImageRejected(f"image exceeds {max_bytes} bytes")
        try:
            data = base64.b64decode(encoded, validate=False)
        except (binascii.Error, ValueError) as exc:
            raise ImageRejected("data URL is not valid base64") from exc
        if len(data) > max_bytes:
            raise ImageRejected(f"image exceeds {max_bytes} bytes")
        detected = _sniff(data)
        if detected is None:
            raise ImageRejected("data is not a png, jpeg, gif or webp image")
        if detected != mime:
            raise ImageRejected(f"declared {mime} but the data is {detected}")
        return ref
    parts = urlsplit(ref)
    if parts.scheme in ("http", "https") and parts.netloc:
        if len(ref) > MAX_URL_LENGTH:
            raise ImageRejected(f"URL longer than {MAX_URL_LENGTH} characters")
        return ref
    raise ImageRejected("must be a data URL or an http(s) URL; paths and file: URLs are not accepted")

"""One colour per agent or role name, the same on every page that names it (rounds, records, agents)."""

from __future__ import annotations

import zlib

# Hues far apart on the colour wheel. A raw `crc32 % 360` put Planner (237) and CodeInterpreter (232)
# on the same blue, so the two roles of nearly every post looked alike. TaskWeaver's roles get fixed,
# distinct hues; any other name is hashed onto the palette (stable, though two may share a colour).
ROLE_PALETTE = (215, 150, 275, 30, 330, 185, 95, 250, 5, 55, 305, 125)
KNOWN_ROLE_HUES: dict[str, int] = {"User": 215, "Planner": 275, "CodeInterpreter": 150, "WebExplorer": 30}


def role_hue(role: str) -> int:
    """A stable colour (HSL hue) per role name, so a role looks the same on every page."""
    if role in KNOWN_ROLE_HUES:
        return KNOWN_ROLE_HUES[role]
    return ROLE_PALETTE[zlib.crc32(role.encode()) % len(ROLE_PALETTE)]

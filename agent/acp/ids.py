"""Random ids (session ids, message ids) as version-4 UUIDs, made from os.urandom: `uuid`
(and `platform` behind it) is not imported before the `session/new` answer."""

from __future__ import annotations

import os


def uuid4() -> str:
    """A random UUID, version 4, in its usual form (`8-4-4-4-12` hex digits)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

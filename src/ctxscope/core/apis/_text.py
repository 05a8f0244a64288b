"""Plain text of a content value, as the session fingerprint reads it (SPEC section 1)."""

from __future__ import annotations

import json
from typing import Any

from ctxscope.core.apis._base import field

_MEDIA = ("image", "image_url", "input_image", "document", "input_file")


def content_text(value: Any) -> str:
    """A string, or the text parts of a list of blocks; media by their type only (no base64 hashing)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
                continue
            text = field(block, "text")
            if isinstance(text, str):
                parts.append(text)
            elif field(block, "type") in _MEDIA:
                parts.append(f"<{field(block, 'type')}>")
        return "\n".join(parts)
    return json.dumps(value, sort_keys=True, default=str)


def system_and_first_user(system: list[str], messages: Any) -> tuple[str, str]:
    """System/developer texts (after ``system``) and the first user message's text."""
    first_user = ""
    for message in messages or ():
        role = field(message, "role")
        if role in ("system", "developer"):
            system.append(content_text(field(message, "content")))
        elif role == "user":
            first_user = content_text(field(message, "content"))
            break
    return "\n".join(s for s in system if s), first_user

"""Results beyond JSON: text, images, sounds and resources for the agent.

A tool that returns plain JSON answers with it, as text and as MCP's
`structuredContent`. A tool that returns a `Rich` answers with its parts, in order,
and its `structured` value besides, if any. Either way the host saves the whole
result and replays it byte for byte.

    return Rich([Text("Sales by month:"), Image(png_bytes, "image/png")],
                structured={"months": 12})
"""

from dataclasses import dataclass, field
from typing import Any, List, Optional, Union


@dataclass
class Text:
    """Text for the agent to read."""

    text: str


@dataclass
class Image:
    """An image: its bytes (sent in base64) and MIME type, such as `image/png`."""

    data: bytes
    mime_type: str


@dataclass
class Audio:
    """A sound: its bytes (sent in base64) and MIME type, such as `audio/wav`."""

    data: bytes
    mime_type: str


@dataclass
class ResourceLink:
    """A link to a resource, for the client to fetch."""

    uri: str
    name: str
    description: Optional[str] = None
    mime_type: Optional[str] = None


@dataclass
class Resource:
    """A resource carried in the result: `text`, or the bytes `blob`."""

    uri: str
    mime_type: Optional[str] = None
    text: Optional[str] = None
    blob: Optional[bytes] = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise TypeError("a Resource holds either text or blob")


Content = Union[Text, Image, Audio, ResourceLink, Resource]


@dataclass
class Rich:
    """A result in parts, and optionally a structured value besides them (declare
    its schema with `@tool(output_schema=...)`)."""

    parts: List[Content] = field(default_factory=list)
    structured: Any = None


def add_parts(parts: List[Content]) -> None:
    """Hands `parts` to the host, in order."""
    from wit_world.imports import content as wit

    for part in parts:
        wit.add(_to_wit(wit, part))


def _to_wit(wit: Any, part: Content) -> Any:
    if isinstance(part, Text):
        return wit.Part_Text(part.text)
    if isinstance(part, Image):
        return wit.Part_Image(wit.Media(data=bytes(part.data), mime_type=part.mime_type))
    if isinstance(part, Audio):
        return wit.Part_Audio(wit.Media(data=bytes(part.data), mime_type=part.mime_type))
    if isinstance(part, ResourceLink):
        return wit.Part_ResourceLink(
            wit.ResourceLink(
                uri=part.uri,
                name=part.name,
                description=part.description,
                mime_type=part.mime_type,
            )
        )
    if isinstance(part, Resource):
        body = (
            wit.ResourceBody_Text(part.text)
            if part.text is not None
            else wit.ResourceBody_Blob(bytes(part.blob or b""))
        )
        return wit.Part_Embedded(
            wit.EmbeddedResource(uri=part.uri, mime_type=part.mime_type, body=body)
        )
    raise TypeError(f"not a content part: {part!r}")

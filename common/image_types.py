"""What image type a file's first bytes announce: uploads are sniffed by their content
(ingestion/sniff.py), and images sent to a remote model are labelled by it (providers)."""

from __future__ import annotations

IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)


def image_type(head: bytes) -> str | None:
    """The image MIME type that these first bytes announce, or None for anything else."""
    for signature, mime in IMAGE_SIGNATURES:
        if head.startswith(signature):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None

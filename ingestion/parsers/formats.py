"""Every format module; importing this registers them all with base.register."""

from ingestion.parsers import docx, image, link, pdf, pptx, sheets, subtitles, text, video

__all__ = ["docx", "image", "link", "pdf", "pptx", "sheets", "subtitles", "text", "video"]

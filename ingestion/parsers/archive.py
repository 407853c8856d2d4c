"""Office files are zip archives: refuse bombs and broken archives before a library unpacks them."""

from __future__ import annotations

import zipfile
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _

from ingestion.parsers.base import ParseError

MAX_RATIO = 500  # a member that unpacks to more than this many times its packed size is a bomb


def check_archive(path: Path, required: tuple[str, ...] = ()) -> None:
    """Raise ParseError unless `path` is a readable zip with the `required` members whose
    unpacked size stays within PORTAL_MAX_UNZIPPED_MB and sane compression ratios."""
    limit = settings.MAX_UNZIPPED_MB * 1024 * 1024
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            names = {member.filename for member in members}
    except (zipfile.BadZipFile, OSError) as exc:
        raise ParseError(_("The file is not a readable Office document (a broken zip archive: %s).") % exc) from exc
    missing = [name for name in required if name not in names]
    if missing:
        raise ParseError(
            _("The file is incomplete: the part %s is missing. Save it again from its program.") % missing[0]
        )
    total = sum(member.file_size for member in members)
    if total > limit:
        raise ParseError(
            _("The file unpacks to %(size)s MB, more than the %(limit)s MB allowed (PORTAL_MAX_UNZIPPED_MB).")
            % {"size": f"{total / 1048576:,.0f}", "limit": settings.MAX_UNZIPPED_MB}
        )
    for member in members:
        if member.file_size > 1048576 and member.file_size > MAX_RATIO * max(member.compress_size, 1):
            raise ParseError(
                _("The file looks like a zip bomb: %(name)s unpacks %(ratio)s times larger than it is stored.")
                % {"name": member.filename, "ratio": member.file_size // max(member.compress_size, 1)}
            )

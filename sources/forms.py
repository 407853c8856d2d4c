"""The form of a source, on its pages and in the admin: the fields a person sets, in
sources.actions.FIELDS order, then the credentials, which are write-only: never filled in
from what is stored (not even masked), and left empty to keep the stored ones. Validation
is sources.actions.check_source's, its messages attached to their fields."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.http import QueryDict
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from knowledge.models import Collection
from sources.actions import FIELDS, address_changed, check_source
from sources.crypto import CredentialsError
from sources.models import Source
from sources.remotes import Credentials

HELP_TEXTS = {
    "kind": _(
        "Server folder: a folder on this server, under PORTAL_SOURCE_ROOTS. Git repository: cloned and pulled. "
        "WebDAV share: a folder of Nextcloud, ownCloud, SharePoint or any WebDAV server. S3 bucket: AWS S3, "
        "MinIO or any S3-compatible store."
    ),
    "url": _(
        "Server folder: its absolute path (/srv/shares/handbook). Git: the repository's https:// address, or a "
        "path on this server under PORTAL_SOURCE_ROOTS. WebDAV: the folder's https:// address. S3: the "
        "endpoint's https:// address, empty for AWS itself. Never put a user name or password in it: enter "
        "them under Credentials."
    ),
    "branch": _("Git only: the branch to follow; empty: the repository's default branch."),
    "bucket": _("S3 only (required there): the bucket's name."),
    "region": _("S3 only: the bucket's region (eu-west-1); empty: the endpoint's default."),
    "prefix": _(
        "A folder inside the source to sync alone: a sub-folder, a Git sub-path, an S3 key prefix. Empty: all of it."
    ),
    "target": _(
        "Where the source's files go in the collection: with “shared”, a.md in the source becomes shared/a.md. "
        "Empty: the collection's top."
    ),
    "include": _(
        "Glob patterns, one per line; only matching files are synced (empty: every file). “*” matches any "
        "characters, “/” included; a pattern ending in “/” is a folder (docs/). Lines starting with # are "
        "comments."
    ),
    "exclude": _(
        "Glob patterns, one per line, of files never synced, even when included (*.tmp, drafts/). “*” matches "
        "any characters, “/” included; a pattern ending in “/” is a folder."
    ),
    "schedule": _(
        "Empty: synced only by hand (Sync now). An interval: “30m”, “6h”, “1d” (5 minutes at least). Or five "
        "cron fields, in the portal's time zone: “0 3 * * 1-5” (minute, hour, day of month, month, day of week)."
    ),
    "link_template": _(
        "Where a cited file opens at its source: a web address with {path} (the file's path in the source) and "
        "optionally {branch}, e.g. https://git.example.com/docs/src/branch/{branch}/{path}. Empty: no link "
        "(a WebDAV file links to its own address)."
    ),
    "enabled": _("A disabled source is not synced on its schedule; Sync now still runs it."),
}
KEEP = _("Leave empty to keep the stored ones.")
# "scheme://user:password@" at the start of an address: the part to leave out when it is shown again.
USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#]*@")


class WriteOnlyInput(forms.TextInput):
    """A text box that never shows a value, not even the one just sent back with an error."""

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        return super().get_context(name, None, attrs)


class SourceFormBase(forms.ModelForm):
    """The fields and checks shared by the pages' form and the admin's."""

    username = forms.CharField(
        label=_("User name or access key"),
        required=False,
        max_length=500,
        strip=True,
        widget=WriteOnlyInput(attrs={"autocomplete": "off"}),
        help_text=format_lazy("{} {}", _("Git and WebDAV: the user name. S3: the access key id."), KEEP),
    )
    password = forms.CharField(
        label=_("Password, token or secret key"),
        required=False,
        max_length=4000,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=format_lazy(
            "{} {}",
            _("Git: a password or an access token. WebDAV: the password (or an app password). S3: the secret key."),
            KEEP,
        ),
    )
    clear_credentials = forms.BooleanField(
        label=_("Remove the stored credentials"),
        required=False,
        help_text=_(
            "The source is then read without logging in. Changing the kind, the address's scheme, host or port, "
            "or the bucket removes them too, unless new ones are entered with the change."
        ),
    )

    class Meta:
        model = Source
        fields = list(FIELDS)
        help_texts = HELP_TEXTS
        widgets = {
            "include": forms.Textarea(attrs={"rows": 3, "placeholder": "docs/\n*.md"}),
            "exclude": forms.Textarea(attrs={"rows": 3, "placeholder": "*.tmp\ndrafts/"}),
            "url": forms.TextInput(attrs={"placeholder": "https://git.example.com/team/handbook.git"}),
            "schedule": forms.TextInput(attrs={"placeholder": "6h"}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["kind"].help_text = HELP_TEXTS["kind"]

    def _post_clean(self) -> None:
        """The model's own checks, then check_source's, each message on its field."""
        super()._post_clean()  # type: ignore[misc]
        self._forget_address_credentials()
        if not hasattr(self.instance, "collection"):
            return  # the admin's collection field is wrong: its error says so
        try:
            check_source(self.instance)
        except ValidationError as exc:
            # Every field's problem at once, except where the form already found one.
            fresh = {name: errors for name, errors in exc.message_dict.items() if name not in self.errors}
            if fresh:
                self.add_error(None, ValidationError(fresh))

    def _forget_address_credentials(self) -> None:
        """An address typed with a user name and password in it is refused (check_source);
        the form shown again keeps the address without them, so they are not sent back. A
        pattern rather than urlsplit, which raises on a malformed host (http://u:p@[::1)."""
        url = str(self.data.get(self.add_prefix("url"), ""))
        bare = USERINFO.sub(r"\1", url.strip(), count=1)
        if bare != url.strip():
            data: QueryDict | dict[str, Any] = self.data.copy() if isinstance(self.data, QueryDict) else dict(self.data)
            data[self.add_prefix("url")] = bare
            self.data = data

    def credentials(self) -> Credentials | None:
        """What to store: None keeps the stored credentials (nothing typed)."""
        data = self.cleaned_data
        return merged_credentials(self.instance, data["username"], data["password"], keep=not data["clear_credentials"])


class SourceForm(SourceFormBase):
    """A source of `collection`, on the sources pages."""

    def __init__(self, collection: Collection, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instance.collection = collection


def merged_credentials(source: Source, username: str, password: str, *, keep: bool = True) -> Credentials | None:
    """The credentials typed, each empty one kept from those stored (a new password alone
    keeps the user name) unless `keep` is off (the stored ones are being removed) or the
    source now points elsewhere (stored ones belong to the old address); None when nothing
    was typed. Stored credentials that no key opens any more are replaced."""
    if not (username or password):
        return None
    try:
        stored = source.credentials() if source.pk and keep and not address_changed(source) else Credentials()
    except CredentialsError:
        stored = Credentials()
    return Credentials(username or stored.username, password or stored.password, dict(stored.extra))


def credentials_notice(source: Source) -> str:
    """What the page and the API say when a change of address removed the credentials."""
    if not source.credentials_cleared or source.has_credentials:
        return ""
    return str(
        _(
            "The address changed, so the credentials stored for the old one were removed. Enter them again: until "
            "then the source does not sync (or remove them on purpose to sync without logging in)."
        )
    )

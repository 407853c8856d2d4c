from knowledge.models.collections import Collection, CollectionQuerySet
from knowledge.models.documents import Chunk, Document, IndexedDocument, IndexedPage, Page, PageImage, stored_file_names
from knowledge.models.index_versions import IndexVersion, TermStat
from knowledge.models.invitations import Invitation
from knowledge.models.teams import Membership, Role, Team, TeamQuerySet
from knowledge.models.tokens import ApiToken

__all__ = [
    "ApiToken",
    "Chunk",
    "Collection",
    "CollectionQuerySet",
    "Document",
    "IndexVersion",
    "IndexedDocument",
    "IndexedPage",
    "Invitation",
    "Membership",
    "Page",
    "PageImage",
    "Role",
    "Team",
    "TeamQuerySet",
    "TermStat",
    "stored_file_names",
]

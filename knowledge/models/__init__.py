from knowledge.models.collections import Collection, CollectionQuerySet
from knowledge.models.teams import Membership, Role, Team, TeamQuerySet
from knowledge.models.tokens import ApiToken

__all__ = ["ApiToken", "Collection", "CollectionQuerySet", "Membership", "Role", "Team", "TeamQuerySet"]

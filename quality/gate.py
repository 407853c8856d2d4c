"""The gate between a built index version and its flip (registered in knowledge.hooks by
QualityConfig.ready): a collection with golden questions has the new version evaluated
against the active one first; quality.runs flips it or holds it back."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from knowledge.models import IndexVersion
from quality.actions import do_start_evaluation


def hold_for_evaluation(version: IndexVersion) -> bool:
    """True when an evaluation was queued to decide the flip; False: flip now (a first
    version, a rollback target, or a collection with no golden question to measure with)."""
    collection = version.collection
    active = collection.active_version
    if active is None or active.pk == version.pk:
        return False
    try:
        do_start_evaluation(collection, version, baseline=active)
    except ValidationError:
        return False  # nothing to evaluate with: the version flips as it always has
    return True

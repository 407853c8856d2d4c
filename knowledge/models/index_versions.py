from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class IndexVersion(models.Model):
    """One build of a collection's index: which embedder (and dims) and which chunker and
    parser settings made its chunks. A new version builds while the active one serves; the
    flip is one UPDATE of Collection.active_version."""

    class Status(models.TextChoices):
        BUILDING = "building", _("Building")
        # Built, but its evaluation on the golden questions fell short of the active one's:
        # it keeps being updated with new documents and a collection admin may flip it anyway.
        HELD = "held", _("Held back")
        ACTIVE = "active", _("Active")
        RETIRED = "retired", _("Retired")
        FAILED = "failed", _("Failed")

    collection = models.ForeignKey(
        "knowledge.Collection", on_delete=models.CASCADE, related_name="index_versions", verbose_name=_("collection")
    )
    number = models.PositiveIntegerField(_("number"))
    embedder_id = models.CharField(_("embedder"), max_length=200)
    dims = models.PositiveIntegerField(_("dimensions"))
    # Where an image embedder is configured: pictures and video frames embedded in its space.
    image_embedder_id = models.CharField(_("image embedder"), max_length=200, blank=True)
    image_dims = models.PositiveIntegerField(_("image dimensions"), null=True, blank=True)
    config = models.JSONField(_("chunker and parser settings"), default=dict)
    config_hash = models.CharField(max_length=64)
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.BUILDING)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    built_at = models.DateTimeField(_("built"), null=True, blank=True)
    activated_at = models.DateTimeField(_("activated"), null=True, blank=True)
    # BM25 corpus statistics over the version's searchable chunks (see ingestion/stats.py).
    chunk_count = models.PositiveIntegerField(_("searchable chunks"), default=0)
    total_length = models.PositiveBigIntegerField(_("total length in terms"), default=0)

    class Meta:
        ordering = ["collection", "-number"]
        constraints = [models.UniqueConstraint(fields=["collection", "number"], name="index_version_unique_number")]
        verbose_name = _("index version")
        verbose_name_plural = _("index versions")

    def __str__(self) -> str:
        return f"{self.collection} v{self.number} ({self.status})"


class TermStat(models.Model):
    """How many searchable chunks of a version contain a term (its document frequency), kept
    up to date as documents become searchable or stop being so: BM25's idf. With the term's
    highest count in a chunk and highest count / chunk length: together they bound the
    term's BM25 contribution to any chunk (assistant/retrieval/lexical.py). They only grow:
    once a document is counted out they may overstate, which keeps them upper bounds."""

    index_version = models.ForeignKey(IndexVersion, on_delete=models.CASCADE, related_name="+")
    term = models.TextField()
    df = models.IntegerField(default=0)
    max_tf = models.IntegerField(default=0)  # 0: not known, the bound is the idf alone
    max_tf_share = models.FloatField(default=0.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["index_version", "term"], name="term_stat_unique")]

    def __str__(self) -> str:
        return f"{self.term} in v{self.index_version_id}: {self.df}"

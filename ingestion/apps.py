from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class IngestionConfig(AppConfig):
    name = "ingestion"
    verbose_name = _("Ingestion")

    def ready(self) -> None:
        from ingestion import stats, versions
        from knowledge import hooks

        stats.connect()
        hooks.register_build_progress(versions.build_progress)

from django.apps import AppConfig


class HistoryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "history"
    verbose_name = "History: partitions, retention and archive"

    def ready(self) -> None:
        # Imported here: the metrics module reads models, which exist only once apps load.
        from deliveries.ops.metrics import metrics_source_add
        from history.metrics import history_metrics

        metrics_source_add("history", history_metrics)

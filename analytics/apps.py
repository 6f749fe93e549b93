from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "analytics"
    verbose_name = "Delivery analytics"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from analytics.wiring import analytics_listen

        analytics_listen()

from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    name = "deliveries"
    verbose_name = "Deliveries"

    def ready(self) -> None:
        from deliveries import checks  # noqa: F401 - registers the `check --deploy` ESP check

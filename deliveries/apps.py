from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    name = "deliveries"
    verbose_name = "Deliveries"

    def ready(self) -> None:
        from deliveries import checks  # noqa: F401 - registers the `check --deploy` ESP check
        from deliveries.pipeline.enqueue import send_defer
        from flow.line_lease import line_publisher_set

        # A killed worker's waiting sends are published again the way a deferral is.
        line_publisher_set(send_defer)

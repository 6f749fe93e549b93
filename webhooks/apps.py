from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Status webhooks"

    def ready(self) -> None:
        from deliveries.changes import change_listener_add
        from webhooks.events import changes_heard

        # The pipeline announces each round's changes; the producer's endpoints hear them.
        change_listener_add(changes_heard)

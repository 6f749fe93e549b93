from django.apps import AppConfig

from notify import checks  # noqa: F401 - registers the `check --deploy` secret key check


class NotifyConfig(AppConfig):
    name = "notify"
    verbose_name = "Notify"

    def ready(self) -> None:
        # Reads ApiKey rows, so it can only be imported once the models are loaded.
        from notify import key_checks  # noqa: F401 - registers the `check --deploy` key warning

from django.apps import AppConfig

from notify import checks  # noqa: F401 - registers the `check --deploy` secret key check


class NotifyConfig(AppConfig):
    name = "notify"
    verbose_name = "Notify"

from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created

from flow.backend_priority import backend_priority_follow
from notify import checks  # noqa: F401 - registers the `check --deploy` secret key check
from pgtypes import install_on


class NotifyConfig(AppConfig):
    name = "notify"
    verbose_name = "Notify"

    def ready(self) -> None:
        # Reads ApiKey rows, so it can only be imported once the models are loaded.
        from notify import key_checks  # noqa: F401 - registers the `check --deploy` key warning

        # Every process's connections read timestamps through psycopg's C loader (pgtypes).
        connection_created.connect(_timestamps_in_c, dispatch_uid="pgtypes-timestamps")
        # A campaign process's backends share its low CPU priority (where they can).
        connection_created.connect(backend_priority_follow, dispatch_uid="backend-priority")


def _timestamps_in_c(sender: object, connection: Any, **kwargs: Any) -> None:
    install_on(connection)

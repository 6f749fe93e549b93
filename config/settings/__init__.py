"""Django settings for Notify, one module per topic.

Everything comes from the environment, with defaults that point at the local
PostgreSQL, RabbitMQ and Redis on their standard ports. Every number the platform
works by is a setting (prefix NOTIFY_), read once at start. A topic that uses another's
value imports it from that module by name, so the order below does not matter.
"""

from config.settings.analytics import *  # noqa: F403
from config.settings.api import *  # noqa: F403
from config.settings.base import *  # noqa: F403
from config.settings.beat import *  # noqa: F403
from config.settings.campaigns import *  # noqa: F403
from config.settings.channels import *  # noqa: F403
from config.settings.database import *  # noqa: F403
from config.settings.digests import *  # noqa: F403
from config.settings.email import *  # noqa: F403
from config.settings.flow import *  # noqa: F403
from config.settings.history import *  # noqa: F403
from config.settings.ops import *  # noqa: F403
from config.settings.push import *  # noqa: F403
from config.settings.queues import *  # noqa: F403
from config.settings.recipients import *  # noqa: F403
from config.settings.security import *  # noqa: F403
from config.settings.sms import *  # noqa: F403
from config.settings.webhooks import *  # noqa: F403

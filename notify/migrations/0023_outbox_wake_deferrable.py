"""The outbox's insert trigger can leave its wake-up to after the commit.

A transaction that sends a NOTIFY commits under a lock that every other NOTIFYing
commit waits for (PostgreSQL serializes them). A campaign's fan-out writes thousands of
outbox rows per transaction on a backend that runs at the campaign's low priority; had
it notified, a login code's intake would wait for that commit whenever the backend was
preempted in it. Such a transaction sets `notify.outbox_wake` to `after_commit` for
itself (set_config(..., true)); the trigger then stays silent, and the writer wakes the
relays once it has committed, in a transaction of its own (notify/outbox_wake.py).
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION notify_outbox_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('notify.outbox_wake', true) = 'after_commit' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('notify_outbox', '');
    RETURN NULL;
END;
$$;
"""

PREVIOUS = """
CREATE OR REPLACE FUNCTION notify_outbox_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('notify_outbox', '');
    RETURN NULL;
END;
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("notify", "0022_notification_created_brin")]

    operations = [migrations.RunSQL(CREATE, PREVIOUS)]

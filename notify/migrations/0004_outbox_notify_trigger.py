"""Every insert into the outbox wakes the relay: a statement-level trigger calls
pg_notify, which PostgreSQL delivers when the inserting transaction commits (and never
if it rolls back), so the relay hears of exactly the rows it can see."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION notify_outbox_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('notify_outbox', '');
    RETURN NULL;
END;
$$;
CREATE TRIGGER notify_outbox_wake AFTER INSERT ON notify_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION notify_outbox_wake();
"""

DROP = """
DROP TRIGGER IF EXISTS notify_outbox_wake ON notify_outbox;
DROP FUNCTION IF EXISTS notify_outbox_wake();
"""


class Migration(migrations.Migration):
    dependencies = [("notify", "0003_category_fallback_channel")]

    operations = [migrations.RunSQL(CREATE, DROP)]

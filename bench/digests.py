"""S2d: the digest path beside S2's plain one, in the same run.

The same events (in-app + email, over BENCH_EVENT_RECIPIENTS people), the same worker
and relay, timed the same way (bench/pipeline_drains.py), once through `order.shipped`
(every email sent) and once through a comments category that digests email in windows
of BENCH_DIGEST_WINDOW seconds (one email per person and window, the rest `digested`).
The digest run ends when its last window has closed and its email is final, so its time
includes one window at the end; the ratio is digest events/s over plain events/s.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from bench.config import env_int
from bench.pipeline_drains import Drain, pipeline_run
from bench.processes import start_smtp_sink
from bench.report import ratio

if TYPE_CHECKING:  # bench.runner imports this module to run it
    from bench.runner import Bench

DIGEST_CATEGORY = "bench.comment"


def digest_category_ensure(window: int) -> None:
    """The comments category (in-app + email, email digested) and its templates."""
    from notify.models import Category
    from templates_admin.models import Template
    from templates_admin.services import template_version_create, template_version_publish

    category, _ = Category.objects.update_or_create(
        key=DIGEST_CATEGORY,
        defaults={
            "payload_schema": {
                "type": "object",
                "properties": {k: {"type": "string"} for k in ("thread_id", "comment_id", "text")},
                "required": ["thread_id", "comment_id", "text"],
            },
            "default_channels": ["inapp", "email"],
            "digest_windows": {"email": window},
        },
    )
    texts = {
        "inapp": {"title": "Comment {{ comment_id }}", "body": "{{ text }}"},
        "email": {
            "subject": "{{ digest.count }} new comments",
            "html_body": "{% for e in digest.events %}<p>{{ e.payload.text }}</p>{% endfor %}",
            "text_body": "{% for e in digest.events %}{{ e.payload.text }}\n{% endfor %}",
        },
    }
    for channel, fields in texts.items():
        template, _ = Template.objects.get_or_create(
            category=category, channel=channel, locale="en"
        )
        if template.published_version_id is None:
            template_version_publish(
                version=template_version_create(template=template, fields=fields)
            )


def scenario_s2d(bench: Bench) -> None:
    """Time BENCH_EVENTS events through the plain path and the digest path, BENCH_RUNS
    times each, alternating; print both rates and their ratio."""
    from django.core.management import get_commands

    n = bench.config.events
    window = env_int("BENCH_DIGEST_WINDOW", 2)
    digest_category_ensure(window)
    sink, worker_env = start_smtp_sink(bench.stack, bench.env)
    has_relay = "outbox_relay" in get_commands()
    plain: list[Drain] = []
    digest: list[Drain] = []
    for _ in range(bench.config.runs):
        plain.append(pipeline_run(bench, worker_env, n, has_relay))
        digest.append(pipeline_run(bench, worker_env, n, has_relay, category=DIGEST_CATEGORY))
    bench.stack.stop(sink)
    plain_rate = statistics.median(d.rate for d in plain)
    digest_rate = statistics.median(d.rate for d in digest)
    print(
        f"S2d digest path: {ratio(digest_rate, plain_rate):.3g}x the plain path "
        f"({digest_rate:.0f} vs {plain_rate:.0f} events/s, inapp + email, {n} events over "
        f"{bench.config.event_recipients} recipient(s), email digested in {window} s "
        f"windows; the digest run includes its last window)"
    )
    costs = [d.costs for d in digest if d.costs]
    plain_costs = [d.costs for d in plain if d.costs]
    if costs and plain_costs:
        per_digest = statistics.median(c.sql / c.notifications for c in costs)
        per_plain = statistics.median(c.sql / c.notifications for c in plain_costs)
        print(
            f"S2d SQL statements per event, end to end: digest {per_digest:.2f}, "
            f"plain {per_plain:.2f}"
        )

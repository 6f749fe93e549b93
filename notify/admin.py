"""Admin for the core: producers, keys, categories, the outbox and feed entries.

Support's pages for recipients and notifications show deliveries too, so they live with
the deliveries app (deliveries/support/pages.py).
"""

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q
from django.http import HttpRequest
from django.utils.html import format_html_join
from redis.exceptions import RedisError

from notify.admin_mixins import ReadOnlyAdminMixin
from notify.category_labels import CategoryLabelsForm
from notify.deadlines import category_deadlines, duration_text
from notify.erasure import user_hash
from notify.models import (
    ApiKey,
    Category,
    ContactChange,
    Erasure,
    FeedEntry,
    Outbox,
    Producer,
    RecipientGrant,
)
from notify.payloads import schema_problem
from notify.quotas import (
    CAMPAIGN_EVENTS_PER_DAY,
    EVENTS_PER_DAY,
    EVENTS_PER_MINUTE,
    UseToday,
    producer_quotas,
    producers_use_today,
)


class CategoryForm(CategoryLabelsForm):
    """Refuses a payload schema that is not valid JSON Schema, or samples that break it.
    The category's label and description per language are a pair of fields each."""

    class Meta:
        model = Category
        fields = [
            "key", "description", "queue", "mandatory", "marketing", "speed_over_duplicate",
            "payload_schema", "sample_payloads", "default_channels", "fallback_channel",
            "ttl_seconds", "digest_windows", "digest_key", "delays_if_unread", "owner",
        ]  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        problem = schema_problem(data.get("payload_schema") or {}, data.get("sample_payloads"))
        if problem is not None:
            self.add_error(problem.field, problem.message)
        return data


UNAVAILABLE = "unavailable"  # today's use when Redis, which counts it, does not answer


def _quota_text(producer: Producer, field: str) -> str:
    """A quota as it applies: the producer's own, the setting's default, or none."""
    if getattr(producer, field) is not None:
        return str(getattr(producer, field))
    default = getattr(producer_quotas(producer), field)
    return "none" if default is None else f"{default} (default)"


def _use_today(producer: Producer) -> UseToday | None:
    """The producer's use today, as the change list read it for its whole page (one
    round trip), else read now; None when Redis does not answer."""
    if hasattr(producer, "use_today"):
        return producer.use_today
    try:
        return producers_use_today([producer.pk])[producer.pk]
    except RedisError:
        return None


def _use_text(used: int | None, limit: int | None, counted: bool) -> str:
    if not counted:
        return "not counted (no quota)"
    if used is None:
        return UNAVAILABLE
    return str(used) if limit is None else f"{used} of {limit}"


@admin.register(Producer)
class ProducerAdmin(admin.ModelAdmin):
    """Producers with their quotas (own, or the settings' default) and today's use of
    them, read from Redis (the changelist reads a whole page in one round trip)."""

    list_display = (
        "name",
        "per_minute",
        "per_day",
        "campaign_per_day",
        "events_today",
        "campaign_recipients_today",
        "created_at",
    )
    search_fields = ("name",)
    fields = (
        "name",
        "events_per_minute",
        "events_per_day",
        "campaign_events_per_day",
        "events_today",
        "campaign_recipients_today",
    )
    readonly_fields = ("events_today", "campaign_recipients_today")

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        changelist = super().get_changelist_instance(request)
        producers = list(changelist.result_list)
        try:
            use = producers_use_today(producer.pk for producer in producers)
        except RedisError:
            use = {}
        for producer in producers:
            producer.use_today = use.get(producer.pk)
        return changelist

    @admin.display(description="Events per minute")
    def per_minute(self, producer: Producer) -> str:
        return _quota_text(producer, EVENTS_PER_MINUTE)

    @admin.display(description="Events per day")
    def per_day(self, producer: Producer) -> str:
        return _quota_text(producer, EVENTS_PER_DAY)

    @admin.display(description="Campaign recipients per day")
    def campaign_per_day(self, producer: Producer) -> str:
        return _quota_text(producer, CAMPAIGN_EVENTS_PER_DAY)

    @admin.display(description="Events today (UTC)")
    def events_today(self, producer: Producer) -> str:
        if producer.pk is None:
            return "-"
        quotas = producer_quotas(producer)
        use = _use_today(producer)
        return _use_text(
            None if use is None else use.events, quotas.events_per_day, counted=quotas.meters_events
        )

    @admin.display(description="Campaign recipients today (UTC)")
    def campaign_recipients_today(self, producer: Producer) -> str:
        if producer.pk is None:
            return "-"
        per_day = producer_quotas(producer).campaign_events_per_day
        use = _use_today(producer)
        return _use_text(
            None if use is None else use.campaign_recipients, per_day, counted=per_day is not None
        )


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "producer", "all_categories", "scopes", "created_at", "revoked_at")
    list_filter = ("all_categories",)
    readonly_fields = ("prefix", "key_hash", "created_at")
    filter_horizontal = ("categories",)


@admin.register(Category)
class CategoryAdmin(admin.ModelAdmin):
    form = CategoryForm
    list_display = ("key", "owner", "queue", "mandatory", "marketing", "default_channels")
    list_filter = ("queue", "mandatory", "marketing")
    search_fields = ("key",)
    readonly_fields = ("deadlines",)

    @admin.display(description="Deadline per channel")
    def deadlines(self, category: Category) -> str:
        """What applies on each channel (as saved): the category's TTL or the channel's
        default, whichever is shorter — so nobody believes a long TTL reaches email."""
        lines = [
            f"{d.channel}: {duration_text(d.seconds)} "
            + ("(this category's TTL)" if d.from_category else "(the channel's default)")
            for d in category_deadlines(category_ttl=category.ttl_seconds)
        ]
        return format_html_join("\n", "<div>{}</div>", ((line,) for line in lines))


@admin.register(Outbox)
class OutboxAdmin(admin.ModelAdmin):
    list_display = ("notification", "queue", "created_at", "published_at", "publish_attempts")
    raw_id_fields = ("notification",)


@admin.register(FeedEntry)
class FeedEntryAdmin(admin.ModelAdmin):
    list_display = ("id", "recipient", "category", "title", "occurred_at", "created_at", "read_at")
    raw_id_fields = ("recipient", "notification")
    list_select_related = ("recipient",)


@admin.register(Erasure)
class ErasureAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The erasure ledger (docs/erasure.md): evidence, so nobody adds, edits or deletes it
    here; erasing is done from Recipients, the API or `manage.py erase_user`."""

    list_display = (
        "erased_at",
        "via",
        "requested_by",
        "recipient_pk",
        "never_registered",
        "user_hash",
    )
    list_filter = ("via", "never_registered")
    search_fields = ("user_hash",)  # see get_search_results
    search_help_text = "The person's user id (matched by its keyed hash) or a recipient id."
    readonly_fields = (
        "user_hash",
        "recipient_pk",
        "via",
        "requested_by",
        "erased_at",
        "removed",
        "never_registered",
    )

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(user_hash=user_hash(term))
        if term.isdigit():
            match |= Q(recipient_pk=int(term))
        return queryset.filter(match), False


class ContactChangeInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Every change of the person's email or phone, with who made it (support's recipient
    page): the values are keyed hashes, so the record holds no address."""

    model = ContactChange
    verbose_name_plural = "Contact changes"
    fields = ("changed_at", "field", "changed_by", "old_hash", "new_hash")
    readonly_fields = fields
    ordering = ("-changed_at",)
    extra = 0
    can_delete = False
    deletable = True


class RecipientGrantInline(admin.TabularInline):
    """Producers, besides the one that registered the person, whose keys may reach them
    while recipients are owned (NOTIFY_RECIPIENTS_OWNED)."""

    model = RecipientGrant
    fields = ("producer", "granted_at")
    readonly_fields = ("granted_at",)
    extra = 0

"""Admin for the core: producers, keys, categories, the outbox and feed entries.

Support's pages for recipients and notifications show deliveries too, so they live with
the deliveries app (deliveries/support/pages.py).
"""

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Q
from django.utils.html import format_html_join

from notify.deadlines import category_deadlines, duration_text
from notify.erasure import user_hash
from notify.models import ApiKey, Category, Erasure, FeedEntry, Outbox, Producer
from notify.payloads import schema_problem


class CategoryForm(forms.ModelForm):
    """Refuses a payload schema that is not valid JSON Schema, or samples that break it."""

    class Meta:
        model = Category
        fields = [
            "key", "description", "queue", "mandatory", "marketing", "payload_schema",
            "sample_payloads", "default_channels", "fallback_channel", "ttl_seconds",
            "digest_windows", "digest_key", "delays_if_unread",
        ]  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        problem = schema_problem(data.get("payload_schema") or {}, data.get("sample_payloads"))
        if problem is not None:
            self.add_error(problem.field, problem.message)
        return data


@admin.register(Producer)
class ProducerAdmin(admin.ModelAdmin):
    list_display = ("name", "created_at")
    search_fields = ("name",)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "producer", "all_categories", "created_at", "revoked_at")
    list_filter = ("all_categories",)
    readonly_fields = ("prefix", "key_hash", "created_at")
    filter_horizontal = ("categories",)


@admin.register(Category)
class CategoryAdmin(admin.ModelAdmin):
    form = CategoryForm
    list_display = ("key", "queue", "mandatory", "marketing", "default_channels")
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
class ErasureAdmin(admin.ModelAdmin):
    """The erasure ledger (docs/erasure.md): evidence, so nobody adds, edits or deletes it
    here; erasing is done from Recipients, the API or `manage.py erase_user`."""

    list_display = ("erased_at", "via", "requested_by", "recipient_pk", "user_hash")
    list_filter = ("via",)
    search_fields = ("user_hash",)  # see get_search_results
    search_help_text = "The person's user id (matched by its keyed hash) or a recipient id."
    readonly_fields = ("user_hash", "recipient_pk", "via", "requested_by", "erased_at", "removed")

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(user_hash=user_hash(term))
        if term.isdigit():
            match |= Q(recipient_pk=int(term))
        return queryset.filter(match), False

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

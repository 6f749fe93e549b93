"""Admin for the core: producers, keys, categories, the outbox and feed entries.

Support's pages for recipients and notifications show deliveries too, so they live with
the deliveries app (deliveries/support.py).
"""

from django.contrib import admin

from notify.models import ApiKey, Category, FeedEntry, Outbox, Producer


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
    list_display = ("key", "queue", "mandatory", "marketing", "default_channels")
    list_filter = ("queue", "mandatory", "marketing")
    search_fields = ("key",)


@admin.register(Outbox)
class OutboxAdmin(admin.ModelAdmin):
    list_display = ("notification", "queue", "created_at", "published_at", "publish_attempts")
    raw_id_fields = ("notification",)


@admin.register(FeedEntry)
class FeedEntryAdmin(admin.ModelAdmin):
    list_display = ("id", "recipient", "category", "title", "created_at", "read_at")
    raw_id_fields = ("recipient", "notification")
    list_select_related = ("recipient",)

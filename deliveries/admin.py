from django.contrib import admin

from deliveries.models import Delivery, DeliveryAttempt


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "started_at", "duration_ms", "outcome", "status_code", "response")


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "notification",
        "channel",
        "target",
        "status",
        "reason",
        "attempts",
        "updated_at",
    )
    list_filter = ("status", "channel", "reason", "queue")
    search_fields = ("target", "=notification__id")
    raw_id_fields = ("notification", "template_version")
    inlines = [DeliveryAttemptInline]

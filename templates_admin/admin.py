from django.contrib import admin

from templates_admin.models import Template, TemplateVersion


class TemplateVersionInline(admin.StackedInline):
    model = TemplateVersion
    extra = 0
    readonly_fields = ("number", "created_at", "created_by", "published_at")


@admin.register(Template)
class TemplateAdmin(admin.ModelAdmin):
    list_display = ("category", "channel", "locale", "published_version")
    list_filter = ("channel", "locale", "category")
    inlines = [TemplateVersionInline]

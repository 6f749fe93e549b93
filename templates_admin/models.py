"""Templates: (category, channel, locale), each with immutable numbered versions."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from notify.models import Channel


class Template(models.Model):
    category = models.ForeignKey(
        "notify.Category", on_delete=models.CASCADE, related_name="templates"
    )
    channel = models.CharField(max_length=10, choices=Channel.choices)
    locale = models.CharField(max_length=35)
    published_version = models.ForeignKey(
        "TemplateVersion", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["category", "channel", "locale"], name="uniq_template_slot"
            )
        ]

    def __str__(self) -> str:
        return f"{self.category.key} / {self.channel} / {self.locale}"


class TemplateVersion(models.Model):
    """One immutable text of a template. Which fields matter depends on the channel."""

    template = models.ForeignKey(Template, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    subject = models.CharField(max_length=500, blank=True, help_text="Email subject.")
    html_body = models.TextField(blank=True, help_text="Email HTML body.")
    text_body = models.TextField(blank=True, help_text="Email plain-text body.")
    title = models.CharField(max_length=500, blank=True, help_text="Push / in-app title.")
    body = models.TextField(blank=True, help_text="Push / in-app / SMS body.")
    url = models.CharField(max_length=2000, blank=True, help_text="Push / in-app link.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["template", "number"], name="uniq_version_number")
        ]
        ordering = ["template", "-number"]
        # Editing (add) and publishing are separate rights: an editor drafts and previews,
        # only a publisher puts a text in front of users.
        permissions = [("publish_templateversion", "Can publish a template version")]

    def __str__(self) -> str:
        return f"{self.template} v{self.number}"

    @property
    def is_published(self) -> bool:
        return self.template.published_version_id == self.pk


class TemplatePublication(models.Model):
    """The log of publishes: who put which version in use, and when (rollbacks included)."""

    version = models.ForeignKey(
        TemplateVersion, on_delete=models.CASCADE, related_name="publications"
    )
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-published_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.version} published by {self.published_by} at {self.published_at}"

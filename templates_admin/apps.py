from django.apps import AppConfig


class TemplatesAdminConfig(AppConfig):
    name = "templates_admin"
    verbose_name = "Templates"

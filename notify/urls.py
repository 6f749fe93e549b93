from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/", include("notify.api.urls")),
]

handler404 = "notify.api.errors.json_not_found"
handler500 = "notify.api.errors.json_server_error"

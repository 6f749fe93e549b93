from django.urls import path

from deliveries.ops import views

urlpatterns = [path("metrics", views.metrics, name="metrics")]

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from notify.api import views

urlpatterns = [
    path("notifications", views.NotificationCreateApi.as_view(), name="notification-create"),
    path("notifications/batch", views.NotificationBatchApi.as_view(), name="notification-batch"),
    # `users/<user_id>` itself (PUT upserts, DELETE erases) is routed by the highest layer:
    # erasure spans every app, so the view for both methods lives there.
    path("users/<str:user_id>/feed", views.FeedListApi.as_view(), name="feed-list"),
    path("users/<str:user_id>/feed/read", views.FeedReadApi.as_view(), name="feed-read"),
    path("users/<str:user_id>/unread-count", views.UnreadCountApi.as_view(), name="unread-count"),
    path("categories", views.CategoryListApi.as_view(), name="category-list"),
    path("categories/<str:key>", views.CategoryApi.as_view(), name="category"),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
]

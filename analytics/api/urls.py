from django.urls import path

from analytics.api import views

urlpatterns = [
    path(
        "campaigns/<int:campaign_id>/report",
        views.CampaignReportApi.as_view(),
        name="campaign-report",
    ),
    path("users/<str:user_id>/history", views.UserHistoryApi.as_view(), name="user-history"),
    path("analytics/deliveries", views.DeliveriesReportApi.as_view(), name="analytics-deliveries"),
]

from django.urls import path

from campaigns.api import erasure, views

urlpatterns = [
    # PUT (upsert contact data, notify's view) and DELETE (erase the person) on one path.
    path("users/<str:user_id>", erasure.RecipientApi.as_view(), name="recipient"),
    path("campaigns", views.CampaignLaunchApi.as_view(), name="campaign-launch"),
    path("campaigns/<int:campaign_id>", views.CampaignDetailApi.as_view(), name="campaign-detail"),
    path(
        "campaigns/<int:campaign_id>/pause", views.CampaignPauseApi.as_view(), name="campaign-pause"
    ),
    path(
        "campaigns/<int:campaign_id>/resume",
        views.CampaignResumeApi.as_view(),
        name="campaign-resume",
    ),
    path(
        "campaigns/<int:campaign_id>/cancel",
        views.CampaignCancelApi.as_view(),
        name="campaign-cancel",
    ),
]

from django.urls import path

from campaigns.api import views

urlpatterns = [
    path("campaigns", views.CampaignLaunchApi.as_view(), name="campaign-launch"),
    path("campaigns/<int:campaign_id>", views.CampaignDetailApi.as_view(), name="campaign-detail"),
    path("campaigns/<int:campaign_id>/pause", views.CampaignPauseApi.as_view(),
         name="campaign-pause"),
    path("campaigns/<int:campaign_id>/resume", views.CampaignResumeApi.as_view(),
         name="campaign-resume"),
    path("campaigns/<int:campaign_id>/cancel", views.CampaignCancelApi.as_view(),
         name="campaign-cancel"),
]  # fmt: skip

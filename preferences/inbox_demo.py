"""`/inbox/demo`: the inbox component on a page, for the demo recipient, as a product would
embed it (a user token, and a preference-center link for the tab to offer), and the token
endpoint such a product's backend provides. It lives here, not in notify, because it hands
out both notify's token and this app's link.

On only with NOTIFY_INBOX_DEMO (by default with DEBUG): the token endpoint hands the demo
person's token to anyone who asks, which is what a demo needs and nothing else may do.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET, require_POST

from notify.selectors import recipient_get
from notify.tokens import user_token_issue
from preferences.tokens import preference_center_url


def _demo_recipient_id() -> int:
    """The demo recipient's id; 404 when the demo is off or its person does not exist."""
    if not settings.NOTIFY_INBOX_DEMO:
        raise Http404("The inbox demo is off (NOTIFY_INBOX_DEMO).")
    recipient = recipient_get(user_id=settings.NOTIFY_INBOX_DEMO_USER)
    if recipient is None:
        raise Http404(f"No recipient {settings.NOTIFY_INBOX_DEMO_USER!r}: run seed_demo.")
    return recipient.pk


@require_GET
def inbox_demo_page(request: HttpRequest) -> HttpResponse:
    """A host page with `<notify-inbox>`, a freshly minted token and a fresh link to the
    person's preference center in it."""
    recipient_id = _demo_recipient_id()
    context = {
        "user_id": settings.NOTIFY_INBOX_DEMO_USER,
        "token": user_token_issue(recipient_id=recipient_id),
        "preferences_url": preference_center_url(recipient_id=recipient_id),
        "stream_base": settings.NOTIFY_INBOX_DEMO_STREAM_BASE,
    }
    # The page carries credentials (the token, the link): not for caches.
    response = render(request, "preferences/inbox_demo.html", context)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
def inbox_demo_token(request: HttpRequest) -> JsonResponse:
    """A new token for the demo person: what the page asks for when the inbox says its
    token expired (a real product answers this from its own signed-in session)."""
    token = user_token_issue(recipient_id=_demo_recipient_id())
    return JsonResponse({"token": token, "expires_in": settings.NOTIFY_USER_TOKEN_TTL_SECONDS})


urlpatterns = [
    path("inbox/demo", inbox_demo_page, name="inbox-demo"),
    path("inbox/demo/token", inbox_demo_token, name="inbox-demo-token"),
]

"""`/v1/users/{user_id}`: PUT creates or updates the recipient (notify's view), DELETE
erases the person everywhere (campaigns.erasure). One view for both methods, because one
URL resolves to one view; it lives here, in the highest layer, as erasure does."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from campaigns.erasure import person_erase
from notify.api.lookups import user_id_checked
from notify.api.views import RecipientUpsertApi
from notify.models import ErasureVia, Scope


class RecipientApi(RecipientUpsertApi):
    required_scope = {"PUT": Scope.RECIPIENTS_WRITE, "DELETE": Scope.USERS_ERASE}

    @extend_schema(
        operation_id="erase_user",
        request=None,
        responses={204: None},
        summary="Erase the person: contact data, history, devices, caches (scope users:erase).",
        description=(
            "Idempotent: erasing an unknown or already erased user id answers 204 too, and "
            "every request is recorded in the erasure ledger. Consent records are kept under "
            "a keyed hash of the user id; an event for the user id is refused (422 "
            "unknown_recipient) until it is registered again, and a recipient registered "
            "again with this user id, email or phone receives nothing before fresh consent."
        ),
    )
    def delete(self, request: Request, user_id: str) -> Response:
        principal = request.user
        person_erase(
            user_id=user_id_checked(user_id),
            via=ErasureVia.API,
            requested_by=f"producer {principal.producer.name} (key {principal.api_key.prefix})",
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

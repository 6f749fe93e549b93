"""An audience uploaded as a CSV file of user ids: read as a stream, loaded with COPY.

The file is never held in memory: Django spools a large upload to a temporary file, the
reader walks it line by line, and the ids go to PostgreSQL through COPY into a staging
table, from which one INSERT … SELECT DISTINCT keeps each id once. Ids that name no
recipient are kept too (a recipient may be created before the fan-out reaches them);
they are counted, and listed in admin, never fatal.

The format: one user id per line in the first column; an optional header line
`user_id`; blank lines skipped; UTF-8 (a byte-order mark is fine).

Before launch, the launch page stages the file (`upload_stage`): read and bounded by the
same reader, its distinct ids kept as a `StagedUpload`, so the estimate runs over exactly
those rows and a launch that names the staged upload takes exactly them
(`audience_staged_load`), without the file being chosen again.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import IO

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from campaigns.models import Campaign, CampaignMember, StagedMember, StagedUpload
from notify.models import Recipient

USER_ID_MAX = CampaignMember._meta.get_field("user_id").max_length
MEMBERS = CampaignMember._meta.db_table
RECIPIENTS = Recipient._meta.db_table
STAGED = StagedMember._meta.db_table
HEADER = "user_id"
# A staged upload is a launch page's work in progress, not a store: one not launched
# within a day is dropped (the next staging removes it).
STAGED_KEEP = timedelta(days=1)


class UploadProblem(ValueError):
    """The file cannot be an audience; the message names the line."""


@dataclass(frozen=True)
class UploadLoaded:
    """What an upload gave a campaign: distinct ids, and how many name nobody."""

    uploaded: int
    unknown: int


def uploaded_user_ids(file: IO[bytes], *, limit: int | None = None) -> Iterator[str]:
    """The user ids of an uploaded CSV, one at a time, in file order (duplicates kept).

    Raises UploadProblem naming the line when the file is not UTF-8, an id is longer
    than the column, or there are more than `limit` (NOTIFY_CAMPAIGN_MAX_UPLOAD_IDS) ids.
    """
    limit = limit or settings.NOTIFY_CAMPAIGN_MAX_UPLOAD_IDS
    file.seek(0)
    lines = codecs.iterdecode(file, "utf-8-sig")
    count = 0
    try:
        for number, row in enumerate(csv.reader(lines), start=1):
            user_id = row[0].strip() if row else ""
            if not user_id or (number == 1 and user_id.lower() == HEADER):
                continue
            if len(user_id) > USER_ID_MAX:
                raise UploadProblem(
                    f"Line {number}: a user id is at most {USER_ID_MAX} characters."
                )
            count += 1
            if count > limit:
                raise UploadProblem(f"Line {number}: at most {limit} user ids per upload.")
            yield user_id
    except UnicodeDecodeError as error:
        raise UploadProblem(f"The file is not UTF-8 text ({error.reason}).") from error
    except csv.Error as error:
        raise UploadProblem(f"The file is not CSV: {error}.") from error


def upload_problem(file: IO[bytes]) -> str | None:
    """Why an uploaded file cannot be an audience (one pass over it); None when it can."""
    try:
        if next(uploaded_user_ids(file), None) is None:
            return "The file holds no user ids."
        for _ in uploaded_user_ids(file):
            pass
    except UploadProblem as problem:
        return str(problem)
    return None


def audience_upload_load(campaign: Campaign, file: IO[bytes]) -> UploadLoaded:
    """Load the file's user ids as the campaign's audience and count the unknown ones.

    Runs in the caller's transaction (the admin launch), so a campaign is never started
    with half a list; its fan-out is published only after commit.
    """
    with transaction.atomic():
        loaded = _ids_copy(file, table=MEMBERS, owner="campaign_id", owner_id=campaign.pk)
    Campaign.objects.filter(pk=campaign.pk).update(
        uploaded_count=loaded.uploaded, unknown_count=loaded.unknown
    )
    campaign.uploaded_count, campaign.unknown_count = loaded.uploaded, loaded.unknown
    return loaded


def _ids_copy(file: IO[bytes], *, table: str, owner: str, owner_id: object) -> UploadLoaded:
    """COPY the file's ids into a temporary table, keep each once in `table` under
    `owner` = `owner_id`, and count those that name nobody (in the caller's transaction)."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE campaign_upload (user_id text) ON COMMIT DROP")
        with cursor.cursor.copy("COPY campaign_upload (user_id) FROM STDIN") as copy:
            for user_id in uploaded_user_ids(file):
                copy.write_row((user_id,))
        cursor.execute(
            f"""INSERT INTO {table} ({owner}, user_id)
                SELECT DISTINCT %s, user_id FROM campaign_upload""",
            [owner_id],
        )
        uploaded = cursor.rowcount
        cursor.execute("DROP TABLE campaign_upload")
        cursor.execute(
            f"""SELECT count(*) FROM {table} m
                 WHERE m.{owner} = %s
                   AND NOT EXISTS (SELECT 1 FROM {RECIPIENTS} r WHERE r.user_id = m.user_id)""",
            [owner_id],
        )
        (unknown,) = cursor.fetchone()
    return UploadLoaded(uploaded, unknown)


def upload_stage(file: IO[bytes], *, staged_by: AbstractBaseUser, file_name: str) -> StagedUpload:
    """Stage an audience file before launch: its distinct ids kept under a new
    StagedUpload of `staged_by`, counted as a launch counts them. The file is read by the
    launch's own reader, so the same bound (NOTIFY_CAMPAIGN_MAX_UPLOAD_IDS) and checks
    apply (UploadProblem). Staged uploads older than STAGED_KEEP are dropped first."""
    with transaction.atomic():
        StagedUpload.objects.filter(staged_at__lt=timezone.now() - STAGED_KEEP).delete()
        staged = StagedUpload.objects.create(
            staged_by=staged_by, file_name=file_name[:255], uploaded_count=0, unknown_count=0
        )
        loaded = _ids_copy(file, table=STAGED, owner="staged_id", owner_id=staged.pk)
        StagedUpload.objects.filter(pk=staged.pk).update(
            uploaded_count=loaded.uploaded, unknown_count=loaded.unknown
        )
    staged.uploaded_count, staged.unknown_count = loaded.uploaded, loaded.unknown
    return staged


def staged_upload_find(*, staged_id: object, staged_by: AbstractBaseUser) -> StagedUpload | None:
    """The staged upload `staged_id` if `staged_by` staged it and it is not past
    STAGED_KEEP; None otherwise (someone else's token names nothing)."""
    return StagedUpload.objects.filter(
        pk=staged_id, staged_by=staged_by, staged_at__gte=timezone.now() - STAGED_KEEP
    ).first()


def audience_staged_load(campaign: Campaign, staged: StagedUpload) -> UploadLoaded:
    """Make the staged upload's rows the campaign's audience, exactly those (one INSERT …
    SELECT), and drop the staged upload. In the launch's transaction, as a file load is.
    The unknown ids are counted again: someone may have registered since staging. A
    second launch of the same staging (a double click) waits for the first and then
    raises UploadProblem, so its transaction launches nothing."""
    with transaction.atomic(), connection.cursor() as cursor:
        if StagedUpload.objects.select_for_update().filter(pk=staged.pk).first() is None:
            raise UploadProblem("This staged file was launched already.")
        cursor.execute(
            f"""INSERT INTO {MEMBERS} (campaign_id, user_id)
                SELECT %s, s.user_id FROM {STAGED} s WHERE s.staged_id = %s""",
            [campaign.pk, staged.pk],
        )
        uploaded = cursor.rowcount
        cursor.execute(
            f"""SELECT count(*) FROM {MEMBERS} m
                 WHERE m.campaign_id = %s
                   AND NOT EXISTS (SELECT 1 FROM {RECIPIENTS} r WHERE r.user_id = m.user_id)""",
            [campaign.pk],
        )
        (unknown,) = cursor.fetchone()
        StagedUpload.objects.filter(pk=staged.pk).delete()
    Campaign.objects.filter(pk=campaign.pk).update(uploaded_count=uploaded, unknown_count=unknown)
    campaign.uploaded_count, campaign.unknown_count = uploaded, unknown
    return UploadLoaded(uploaded, unknown)


def unknown_user_ids(campaign: Campaign, *, chunk: int = 5000) -> Iterator[str]:
    """The uploaded ids that name no recipient, in id order, read in chunks (a listing
    of a million ids must not sit in memory)."""
    after = ""
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                f"""SELECT m.user_id FROM {MEMBERS} m
                     WHERE m.campaign_id = %s AND m.user_id > %s
                       AND NOT EXISTS (SELECT 1 FROM {RECIPIENTS} r WHERE r.user_id = m.user_id)
                     ORDER BY m.user_id LIMIT %s""",
                [campaign.pk, after, chunk],
            )
            rows = [user_id for (user_id,) in cursor.fetchall()]
        yield from rows
        if len(rows) < chunk:
            return
        after = rows[-1]

"""Bounces and spam complaints for email sent over SMTP.

An ESP reports what happened to a message after it accepted it; an SMTP relay does not:
a mailbox that turns out dead, or a person who presses "spam", answers by mail, later.
So each email's envelope sender names its delivery (VERP: `verp.py`), the MTA of the
bounce domain hands the mail that comes back to the `bounces` process (`server.py`, SMTP
or LMTP), which reads it (`reports.py`: RFC 3464 delivery status notifications and the
many non-standard bounce formats through flufl.bounce, RFC 5965 ARF complaints) and
applies it through `provider_event_apply`, as an ESP's webhook event is applied
(`inbound.py`). Every mail that comes in is kept (`BounceMail`, shown in admin), matched
or not, so nothing is lost and nothing loops.
"""

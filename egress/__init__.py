"""Outbound HTTP, guarded: where a post may go (`origins.py`, `guard.py`: public
addresses only, pinned to what was checked), how long it may take and how much of the
answer is read (`deadline.py`, `sessions.py`). Push providers, email service providers
and status webhooks all post through it. It stands on the ground floor and imports no
app."""

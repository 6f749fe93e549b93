"""Status webhooks out: producers' endpoints (endpoints.py), signing (signing.py), where a
post may go (egress.py), posting with retries and disabling (posting.py). Events are
written by webhooks/events.py."""

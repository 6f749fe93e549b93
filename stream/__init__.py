"""The live stream: a person's feed over Server-Sent Events (`views.py`), its bounds per
person and per key (`limits.py`), the wakeups that tell waiting streams of new entries
(`wakeups.py`) and its place in the OpenAPI schema (`schema.py`). It stands above
deliveries: it reads devices and marks them live (deliveries/pipeline/live.py), which
the push sender reads to skip a device that already showed the entry."""

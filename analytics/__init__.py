"""Delivery analytics: every counted change is an event written in the change's own
transaction (`analytics.events`), shipped in batches by the `analytics` process into
ClickHouse (`analytics.store`: embedded chDB by default, a server by URL), and read back
as campaign reports and delivery counts (`analytics.api`). docs/analytics.md."""

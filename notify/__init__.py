"""Notify's core domain: producers and API keys, categories, recipients, intake, the
outbox, the feed. The project that wires the apps together is `config`."""

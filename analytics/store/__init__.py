"""The ClickHouse store: its tables (`schema`), how a process reaches it (`backend`), the
shipper that fills it (`shipper`) and the reports read from it (`reports`)."""

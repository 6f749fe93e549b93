from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    name = "deliveries"
    verbose_name = "Deliveries"

    def ready(self) -> None:
        from deliveries import checks  # noqa: F401 - registers the `check --deploy` ESP check
        from deliveries.channels.sms.smpp.receipts import receipt_applier_set
        from deliveries.pipeline.enqueue import send_defer
        from deliveries.pipeline.sms_receipts import sms_receipt_apply
        from flow.line_lease import line_publisher_set

        # A killed worker's waiting sends are published again the way a deferral is.
        line_publisher_set(send_defer)
        # SMS receipts come in on a channel's bind and go the provider-feedback road.
        receipt_applier_set(sms_receipt_apply)

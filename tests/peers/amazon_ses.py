"""An Amazon SES v2 API on loopback, as boto3 calls it with `endpoint_url`:
`POST /v2/email/outbound-emails` (SendEmail, signed with SigV4) answered
`{"MessageId": "..."}`, its errors as AWS's REST-JSON protocol gives them (the code in
the `x-amzn-ErrorType` header, `{"message": ...}`); and the SNS notifications that carry
SES's events to our webhook (the SNS envelope, its `x-amz-sns-*` headers, HTTP basic
auth in the subscription's URL), including a SubscriptionConfirmation, each signed as
SNS signs (a key and certificate made here, the certificate served on loopback).
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID
from django.conf import settings

from tests.peers.base import LoopbackHttpPeer
from tests.peers.esp import FORGED, SECRET, Answer, EspPeer, WebhookPost, json_post, now_iso

ACCESS_KEY_ID = "AKIAPEERPEERPEERPEER"
SECRET_ACCESS_KEY = "peer-secret-access-key"
REGION = "eu-west-1"
TOPIC_ARN = f"arn:aws:sns:{REGION}:123456789012:ses-events"


def _error(status: int, code: str, message: str) -> Answer:
    return status, {"message": message}, {"x-amzn-ErrorType": f"{code}:http://internal/"}


class AmazonSESPeer(EspPeer):
    esp = "amazon_ses"
    resubscribes = True  # a Subscription event that opts in again

    def refuse(self, path: str, headers: Any) -> Answer | None:
        if path.rstrip("/") != "/v2/email/outbound-emails":
            return _error(404, "NotFoundException", "Not found")
        auth = headers.get("Authorization", "")
        if not auth.startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY_ID}/"):
            return _error(403, "UnrecognizedClientException", "The security token is invalid.")
        return None

    def parse(self, body: bytes, headers: Any) -> dict:
        request = json.loads(body)
        raw = message_from_bytes(base64.b64decode(request["Content"]["Raw"]["Data"]))
        return {
            **request,
            "to": request["Destination"]["ToAddresses"][0],
            "subject": str(raw["Subject"]),
            "raw": raw,
        }

    def new_message_id(self, message: dict) -> str:
        return f"0102018c{uuid.uuid4().hex}-{uuid.uuid4().hex[:8]}-000000"

    def accepted(self, message_id: str, record: dict) -> Answer:
        return 200, {"MessageId": message_id}, {}

    # --- SES's error answers, to queue in `answers` -------------------------------------
    @staticmethod
    def rate_limited() -> Answer:
        return _error(429, "TooManyRequestsException", "Maximum sending rate exceeded.")

    @staticmethod
    def unavailable() -> Answer:
        return _error(503, "ServiceUnavailable", "Service is unavailable.")

    @staticmethod
    def account_refused() -> Answer:
        return _error(400, "SendingPausedException", "Sending is paused for this account.")

    @staticmethod
    def bad_message() -> Answer:
        return _error(400, "MessageRejected", "Email contains a virus.")

    # --- SNS notifications of SES events -------------------------------------------------
    def event(self, kind: str, message_id: str, to: str) -> dict:
        mail = {
            "timestamp": now_iso(), "source": "notify@localhost", "messageId": message_id,
            "destination": [to], "headersTruncated": False, "headers": [],
        }  # fmt: skip
        bounce = {"bouncedRecipients": [{"emailAddress": to, "action": "failed",
                  "status": "5.1.1", "diagnosticCode": "smtp; 550 5.1.1 user unknown"}],
                  "timestamp": now_iso(), "feedbackId": uuid.uuid4().hex}  # fmt: skip
        specific = {
            "delivered": {"eventType": "Delivery", "delivery": {
                "timestamp": now_iso(), "recipients": [to], "smtpResponse": "250 2.6.0 OK"}},
            "hard_bounce": {"eventType": "Bounce", "bounce": {
                **bounce, "bounceType": "Permanent", "bounceSubType": "General"}},
            "soft_bounce": {"eventType": "Bounce", "bounce": {
                **bounce, "bounceType": "Transient", "bounceSubType": "MailboxFull"}},
            "complaint": {"eventType": "Complaint", "complaint": {
                "complainedRecipients": [{"emailAddress": to}], "timestamp": now_iso(),
                "feedbackId": uuid.uuid4().hex, "complaintFeedbackType": "abuse"}},
            # SES's list management: the person opted out by the unsubscribe header SES
            # added to the message (and, later, back in).
            "unsubscribe": {"eventType": "Subscription", "subscription": _subscription(
                source="UnsubscribeHeader", opted_out=True)},
            "resubscribe": {"eventType": "Subscription", "subscription": _subscription(
                source="ListManagement", opted_out=False)},
            "open": {"eventType": "Open", "open": {
                "timestamp": now_iso(), "userAgent": "Mozilla/5.0", "ipAddress": "192.0.2.1"}},
            "click": {"eventType": "Click", "click": {
                "timestamp": now_iso(), "link": "https://example.com/o",
                "userAgent": "Mozilla/5.0", "ipAddress": "192.0.2.1"}},
        }[kind]  # fmt: skip
        return sns_message("Notification", json.dumps({**specific, "mail": mail}))

    def __init__(self) -> None:
        super().__init__()
        self.sns = SnsSigner()

    def start(self) -> None:
        super().start()
        self.sns.start()

    def stop(self) -> None:
        self.sns.stop()
        super().stop()

    def signed(
        self, body: Any, *, good: bool = True, version: str = "1", cert_url: str = ""
    ) -> WebhookPost:
        """`body` posted as SNS posts it: signed by SNS (our test certificate, served on
        loopback unless `cert_url` says where) with `version`, with the subscription's
        credentials (`good`) or forged ones."""
        body = self.sns.sign(body, version=version, cert_url=cert_url)
        headers = {
            "x-amz-sns-message-type": body["Type"],
            "x-amz-sns-message-id": body["MessageId"],
            "x-amz-sns-topic-arn": body["TopicArn"],
        }
        # SNS posts text/plain; its body is JSON all the same.
        post = json_post(body, auth=SECRET if good else FORGED, headers=headers)
        post.content_type = "text/plain; charset=UTF-8"
        return post

    def anymail(self, url: str = "") -> dict[str, Any]:
        url = url or self.url
        client = settings.ANYMAIL["AMAZON_SES_CLIENT_PARAMS"]  # its timeouts and retries kept
        return {
            "AMAZON_SES_SESSION_PARAMS": {
                "aws_access_key_id": ACCESS_KEY_ID,
                "aws_secret_access_key": SECRET_ACCESS_KEY,
            },
            "AMAZON_SES_CLIENT_PARAMS": {**client, "region_name": REGION, "endpoint_url": url},
        }

    def env(self) -> dict[str, str]:
        return {
            "AMAZON_SES_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AMAZON_SES_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "AMAZON_SES_REGION": REGION,
            "AMAZON_SES_ENDPOINT_URL": self.url,
        }


def _subscription(*, source: str, opted_out: bool) -> dict:
    """The `subscription` of an SES Subscription event: the person's preferences on our
    contact list before and after (all topics, or the one topic)."""

    def preferences(out: bool) -> dict:
        topic = {"topicName": "marketing", "subscriptionStatus": "OptOut" if out else "OptIn"}
        return {"unsubscribeAll": out, "topicSubscriptionStatus": [topic]}

    return {
        "contactList": "notify", "timestamp": now_iso(), "source": source,
        "newTopicPreferences": preferences(opted_out),
        "oldTopicPreferences": preferences(not opted_out),
    }  # fmt: skip


def sns_message(kind: str, message: str, **extra: Any) -> dict:
    """An SNS message of `kind` (Notification, SubscriptionConfirmation) as SNS posts it."""
    return {
        "Type": kind, "MessageId": str(uuid.uuid4()), "TopicArn": TOPIC_ARN,
        "Message": message, "Timestamp": now_iso(), "SignatureVersion": "1",
        "Signature": base64.b64encode(b"not-checked").decode(),
        "SigningCertURL": f"https://sns.{REGION}.amazonaws.com/SimpleNotificationService-0.pem",
        **extra,
    }  # fmt: skip


def subscription_confirmation(subscribe_url: str) -> dict:
    """The SubscriptionConfirmation SNS posts when the topic is subscribed to our URL."""
    token = uuid.uuid4().hex
    return sns_message(
        "SubscriptionConfirmation",
        f"You have chosen to subscribe to the topic {TOPIC_ARN}.",
        Token=token,
        SubscribeURL=subscribe_url,
    )


class SnsSigner(LoopbackHttpPeer):
    """SNS's signing, with a key and certificate made here: `sign` signs a message as SNS
    does (SignatureVersion 1: SHA-1, 2: SHA-256), and the certificate is served on
    loopback (GET of any `.pem` path; `fetched` counts them)."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
        now = datetime.now(UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=30))
            .sign(self.key, hashes.SHA256())
        )
        self.pem = certificate.public_bytes(serialization.Encoding.PEM)
        self.fetched = 0
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                peer.fetched += 1
                found = self.path.endswith(".pem")
                self.send_response(200 if found else 404)
                body = peer.pem if found else b""
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.serve(Handler)
        self.cert_url = f"{self.origin}/SimpleNotificationService-{uuid.uuid4().hex}.pem"

    def sign(self, message: dict, *, version: str = "1", cert_url: str = "") -> dict:
        """The message with SNS's signature fields, signed over SNS's signing text."""
        signed = {**message, "SignatureVersion": version,
                  "SigningCertURL": cert_url or self.cert_url}  # fmt: skip
        digest = hashes.SHA1() if version == "1" else hashes.SHA256()
        signature = self.key.sign(string_to_sign(signed), padding.PKCS1v15(), digest)
        return {**signed, "Signature": base64.b64encode(signature).decode()}


def string_to_sign(message: dict) -> bytes:
    """What SNS signs, as AWS documents it: for a notification, Message, MessageId,
    Subject (only if present), Timestamp, TopicArn and Type; for a (un)subscribe
    confirmation, Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn and Type;
    each "name\nvalue\n"."""
    if message["Type"] == "Notification":
        names = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
    else:
        names = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"]
    return "".join(f"{n}\n{message[n]}\n" for n in names if n in message).encode()

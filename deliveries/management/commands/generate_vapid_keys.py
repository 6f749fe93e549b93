"""`manage.py generate_vapid_keys [--out PATH]`: a new VAPID key pair for Web Push."""

from __future__ import annotations

import base64
import os

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Generate a VAPID key pair. The private key (PEM) goes to --out, or is printed; "
        "the last line printed is the public key (base64url) for the front end's "
        "applicationServerKey."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", help="Write the private key PEM here (mode 0600).")

    def handle(self, *args, out: str | None = None, **options) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        public = key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        if out:
            # Created private from the start: the key is never readable by others.
            descriptor = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                handle.write(pem)
            self.stdout.write(f"Private key written to {out}; set WEBPUSH_VAPID_PRIVATE_KEY={out}")
        else:
            self.stdout.write(pem.rstrip())
        self.stdout.write(base64.urlsafe_b64encode(public).rstrip(b"=").decode())

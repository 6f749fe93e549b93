"""Returned mail as mailbox providers send it, for the bounce tests: an RFC 3464 delivery
status notification, an RFC 5965 ARF spam complaint, and an out-of-office reply."""

from __future__ import annotations


def dsn(*, to: str, rcpt: str, message_id: str, action: str = "failed", status: str = "5.1.1"):
    """A delivery status notification for `rcpt`, sent to the envelope sender `to`."""
    code = "550" if status.startswith("5") else "451"
    return f"""From: MAILER-DAEMON@mx.example.net
To: {to}
Subject: Undelivered Mail Returned to Sender
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="dsn-b"

--dsn-b
Content-Type: text/plain; charset=us-ascii

This is the mail system at host mx.example.net. Your message could not be delivered.

--dsn-b
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.example.net
Arrival-Date: Fri, 4 Dec 2026 10:00:00 +0000

Final-Recipient: rfc822; {rcpt}
Original-Recipient: rfc822; {rcpt}
Action: {action}
Status: {status}
Diagnostic-Code: smtp; {code} {status} <{rcpt}>: Recipient address rejected

--dsn-b
Content-Type: text/rfc822-headers

Return-Path: <{to}>
Message-ID: {message_id}
From: Notify <noreply@notify.example.com>
To: {rcpt}
Subject: Your order shipped

--dsn-b--
""".replace("\n", "\r\n").encode()


def arf(*, to: str, rcpt: str, message_id: str, return_path: str = "") -> bytes:
    """A feedback loop's spam complaint about the message `message_id`, sent to `to`."""
    path = f"Return-Path: <{return_path}>\n" if return_path else ""
    return f"""From: fbl@mailbox.example.org
To: {to}
Subject: FW: Your newsletter
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary="arf-b"

--arf-b
Content-Type: text/plain; charset=us-ascii

This is an email abuse report for an email message received from IP 192.0.2.1.

--arf-b
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: ExampleFBL/1.0
Version: 1
Original-Mail-From: <{return_path or "noreply@notify.example.com"}>
Arrival-Date: Fri, 4 Dec 2026 10:00:00 +0000
Source-IP: 192.0.2.1
Reported-Domain: notify.example.com

--arf-b
Content-Type: message/rfc822
Content-Disposition: inline

{path}Message-ID: {message_id}
From: Notify <noreply@notify.example.com>
To: {rcpt}
Subject: Our news

The body of the reported message.

--arf-b--
""".replace("\n", "\r\n").encode()


def out_of_office(*, to: str, sender: str) -> bytes:
    """An automatic reply from a person who is away."""
    return f"""From: {sender}
To: {to}
Subject: Automatic reply: Your order shipped
Auto-Submitted: auto-replied
MIME-Version: 1.0
Content-Type: text/plain; charset=us-ascii

I am out of the office until Monday and will read your message when I return.
""".replace("\n", "\r\n").encode()

"""S11's baseline: a bare windowed SMPP client, run as a process of its own.

`python -m bench.sms_bare SPEC.json` binds once as a transceiver and submits every
message of the spec with up to WINDOW submit_sm outstanding, each built as the SMS
channel builds it (the project's GSM-7/UCS-2 encoding and submit_sm fields, smpplib's
PDUs); a reader thread matches the answers, and answers each delivery receipt the SMSC
sends (deliver_sm_resp), as the channel's bind does. No Django, database or broker.

It prints one JSON line: the wall-clock time of the first submit and of the last
submit_sm_resp, and the answers by command status. The bind is before the first
submit, so never inside the figure.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from smpplib import client as smpp_client
from smpplib import consts as smpp_consts
from smpplib import smpp

from deliveries.channels.sms.smpp.encoding import encode_text, submit_sm_fields

SOCKET_TIMEOUT = 30.0  # a quiet SMSC for this long fails the baseline


def drain(spec: dict[str, Any]) -> dict[str, Any]:
    """Bind, submit every message with a window of spec["window"], unbind."""
    client = smpp_client.Client(
        spec["host"], spec["port"], timeout=SOCKET_TIMEOUT, allow_unknown_opt_params=True
    )
    client.connect()
    client.bind_transceiver(system_id=spec["system_id"], password=spec["password"])
    messages = spec["messages"]
    window = threading.Semaphore(spec["window"])
    write = threading.Lock()
    statuses: Counter[int] = Counter()
    answered = threading.Event()
    last = [0.0]  # when the last submit_sm_resp came

    def send(command: str, **fields: Any) -> None:
        with write:
            pdu = smpp.make_pdu(command, client=client, **fields)
            client.send_pdu(pdu)

    def read() -> None:
        while sum(statuses.values()) < len(messages):
            pdu = client.read_pdu()
            if pdu.command in ("submit_sm_resp", "generic_nack"):
                statuses[int(pdu.status)] += 1
                last[0] = time.time()
                window.release()
            elif pdu.command == "deliver_sm":
                with write:
                    answer = smpp.make_pdu("deliver_sm_resp", client=client, status=0)
                    answer.sequence = pdu.sequence  # smpplib ignores a given sequence
                    client.send_pdu(answer)
        answered.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    first = time.time()
    for message in messages:
        encoded = encode_text(message["text"])
        for fields in submit_sm_fields(
            source=spec["source"],
            destination=message["to"],
            encoded=encoded,
            whole_in_payload=False,
        ):
            window.acquire()
            send("submit_sm", **fields)
    if not answered.wait(SOCKET_TIMEOUT):
        raise SystemExit(f"only {sum(statuses.values())} of {len(messages)} submits answered")
    client.state = smpp_consts.SMPP_CLIENT_STATE_OPEN  # no unbind handshake to wait for
    client.disconnect()
    return {"first": first, "last": last[0], "statuses": {str(k): v for k, v in statuses.items()}}


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(json.dumps(drain(spec)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`make bench` (`python -m bench`): the shipped processes against bare baselines.

Standalone: it makes its own database (BENCH_DATABASE, default notify_bench), RabbitMQ
vhost (BENCH_VHOST, notify_bench) and Redis database (BENCH_REDIS_DB, 14), starts what
it measures (scripts/web.sh, scripts/stream.sh, scripts/worker.sh, the outbox relay when
the checkout has one, an SMTP sink) on loopback, and stops it all at the end, even on failure. Each
figure is a RATIO to a baseline measured in the same run: medians of BENCH_RUNS runs,
baseline and subject alternating, so a noisy neighbour hits both.

  S1     POST /v1/notifications vs a bare DRF view doing the same two inserts, the
         bare views on a server of their own (gunicorn sync workers, bench.bare_server)
  S5     GET /v1/users/{id}/unread-count vs a bare view reading one Redis key (same)
  S1o, S5o  S1 and S5 as measured from outside: wrk with 2 threads, 10 s rounds
  load   BENCH_LOAD_CONNECTIONS clients for BENCH_LOAD_SECONDS: errors, backends, p99
  stream BENCH_STREAMS open SSE streams on one scripts/stream.sh: memory per stream,
         one notification reaching all of them
  S2     events drained by the worker (inapp + email) vs no-op tasks, same command,
         both from their first message (start-up on its own line); costs per notification
  S2o    S2 from outside: 1,000 events over 100 people drained by every Procfile process
         but web vs a prefork worker of 2 draining 2,000 no-op tasks (events/s : tasks/s)
  S3     p99 of a login code (event -> email delivered) while a campaign drains on the
         low worker vs the same codes idle
  S4     a campaign's fan-out (campaign_fan_out, in-process) vs a plain batched INSERT
         of the same notification and outbox rows, recipients/s
  S6     a /metrics scrape over 1,000,000 deliveries vs the same over 10,000 (the
         rollups folded, one fold interval of changes left), in-process
  S7     a campaign to BENCH_S7_RECIPIENTS consenting recipients (inapp + email) through
         the Procfile's workers, relays and analytics shipper, launch -> last email in an
         SMTP sink, vs a bare smtplib loop over one connection into the same sink; costs
         per notification; the analytics store's lag during the drain; then one campaign
         to BENCH_S7_LARGE_RECIPIENTS (0: off)
  S8     p90 of login codes by SMS and Web Push (POST -> the SMSC / push service) beside
         an SMTP relay answering each message after BENCH_S8_SMTP_DELAY s, vs the same
         codes idle; then the email backlog's drain once the relay is fast again
  S9     p99 of a login code (event -> email delivered) while BENCH_S9_EVENTS (10,000)
         status webhook events wait for a slow receiver (posted from low), its producer
         subscribed, vs the same codes with nobody subscribed
  S10    BENCH_S10_PUSHES (2,000) Web Push deliveries, one per person, drained by the
         worker into a local push service that decrypts each (answering after
         BENCH_S10_PUSH_DELAY s) vs pywebpush posting the same payloads 16 at once;
         then as many FCM deliveries into a local FCM vs a bare concurrent client;
         provider rate limits lifted; start-up on its own line
  S11    BENCH_S11_SMS (2,000) SMS drained by the worker into a local SMSC (answering
         each submit after BENCH_S11_SMSC_DELAY s) vs a bare SMPP client with the same
         window of 10 and the same PDUs; NOTIFY_RATE_SMPP and SMPP_TPS lifted
  S12    analytics: BENCH_S12_EVENTS (1,000,000) events shipped from PostgreSQL into the
         embedded store by the shipper's batches vs one bare bulk insert of the same rows
         into the same engine; campaign and deliveries reports over
         BENCH_S12_REPORT_EVENTS (10,000,000) events, in-process
  cluster  a 3-node RabbitMQ cluster on loopback with quorum queues vs the single node
         with classic queues: intake events/s (wrk on a web process for each), drain
         events/s (S2's drain) and no-op tasks/s, as ratios; the cluster's start-up on
         its own line; bytes PostgreSQL keeps per notification

Results go to stdout; progress and process logs to stderr and var/bench/.
BENCH_ONLY=s1,s5,s1o,s5o,load,stream,s2,s2o,s2d,s3,s4,s6,s7,s8,s9,s10,s11,s12,cluster picks
scenarios. Logs of the processes: var/bench/*.log.

Where things are: runner.py (the run and its preparation); web_scenarios.py with
intake_unread.py (S1, S5), client_load.py (load) and bare_server.py (their baselines' server);
live_stream.py (stream); pipeline.py with pipeline_drains.py (S2), outside.py (S2o);
login_codes.py (S3) and campaign_fanout.py (S4), with campaign_seed.py (their
recipients); metrics_scrape.py (S6); campaign_drain.py with campaign_drain_run.py and
smtp_sink.py (S7); channel_isolation.py (S8, with the test suite's protocol peers);
webhook_backlog.py (S9);
push_drain.py with push_bare.py (S10) and sms_drain.py with sms_bare.py (S11), with the
test suite's push service, FCM and SMSC; analytics_ship.py (S12);
broker_cluster.py (cluster, on scripts/rabbit_cluster.py); costs.py (SQL, broker messages
and PostgreSQL CPU per notification, counted in the processes by apps.py); under them
config.py, places.py, processes.py,
wrk.py and report.py.
"""

from __future__ import annotations

import sys
import time
import warnings

from bench.config import BenchError, Config
from bench.places import Places
from bench.processes import Stack
from bench.report import machine_line
from bench.runner import Bench
from bench.wrk import ensure_wrk


def main() -> int:
    """Run the bench; the exit status is 1 when a step or a scenario failed."""
    print(machine_line(), flush=True)
    # whitenoise warns that collectstatic never ran for the bench; nothing is served.
    warnings.filterwarnings("ignore", message="No directory at")
    started = time.perf_counter()
    try:
        config = Config.from_environment()
        wrk = ensure_wrk()
        with Stack() as stack:
            code = Bench(config, Places.from_environment(), stack, wrk).run()
    except BenchError as error:
        print(f"bench: {error}", file=sys.stderr)
        return 1
    print(f"bench took {time.perf_counter() - started:.0f} s")
    return code


if __name__ == "__main__":
    raise SystemExit(main())

"""The pipeline: a notification becomes deliveries, and each delivery is sent and recorded.

In the order an event meets them:
- routing.py (with route_lock.py: the lock statement; route_write.py: the write
  statement), through the gate; suppression.py is read there
- enqueue.py: the send messages, admitted by fairness.py (per-recipient push slots)
- claim.py: the conditional UPDATE, held back by ordering.py, skipped by live.py
- attempt.py: one attempt per delivery of a batch; pressure.py (breaker.py, ratelimit.py)
  admits it to the provider (deliveries/channels/), sent_marks.py covers the window
  before its outcome is recorded
- outcome.py (with outcome_log.py): the attempt row and the next state; retry.py decides
  when the next try is
- around them: sweep.py (lost claims and routes), release.py (quiet hours over),
  redrive.py and dead_letters.py (after a fix), cancel.py, devices.py (push devices:
  register, re-register, deactivate)

Tasks (deliveries/tasks.py) take an id and call one of these.
"""

"""Flow control, in one room: who may use the CPU, the providers and the workers' threads
when, so that a slow provider, a flood or a campaign never delays a login code.

- `senders`: each channel's share of a worker's sender threads, and the line in memory
  where a send waits for its channel's sender; `line_lease`: that line's record in Redis,
  so a killed worker's waiting sends are published again by another;
- `fairness`: the push slots that keep one person's pushes from holding the channel;
- `breaker`: a provider's circuit breaker (closed, open, half-open);
- `priority` and `campaign_statements`: campaign work yielding to login codes on a
  shared host (the tasks' turns, and the campaign's database statements a few at a time);
  `backend_priority`: a campaign process's PostgreSQL backends at its own low priority.

It sits on the ground floor beside notify: it imports no app, and every app may import
it. What it must call back in the send pipeline (publishing a recovered send again) is
handed to it when the deliveries app is ready.
"""

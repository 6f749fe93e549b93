-- wrk script of the bench (bench/wrk.py runs it; loopback only).
-- Arguments after "--": METHOD EXPECTED_STATUS PREFIX API_KEY USER_ID
--   POST sends an order.shipped event with a unique event_id (PREFIX-thread-n) each time;
--   GET sends the request as it is. API_KEY may be empty (the bare baselines).
-- At the end it prints one line: BENCH_RESULT {json}, counting the answers whose status
-- was not EXPECTED_STATUS ("unexpected") besides wrk's own socket errors.

local threads = {}
local started = 0

function setup(thread)
  started = started + 1
  thread:set("thread_no", started)
  table.insert(threads, thread)
end

function init(args)
  method = args[1]
  expected = tonumber(args[2])
  prefix = args[3]
  user_id = args[5]
  sent = 0
  unexpected = 0
  headers = { ["Content-Type"] = "application/json" }
  if args[4] ~= nil and args[4] ~= "" then
    headers["Authorization"] = "Bearer " .. args[4]
  end
end

local body_format = '{"event_id":"%s-%d-%d","user_id":"%s","category":"order.shipped",'
  .. '"channels":["inapp","email"],"payload":{"order_number":"B-%d",'
  .. '"delivery_date":"2026-12-03","items_count":1}}'

function request()
  if method ~= "POST" then
    return wrk.format(method, nil, headers, nil)
  end
  sent = sent + 1
  local body = string.format(body_format, prefix, thread_no, sent, user_id, sent)
  return wrk.format("POST", nil, headers, body)
end

function response(status, response_headers, body)
  if status ~= expected then
    unexpected = unexpected + 1
  end
end

function done(summary, latency, requests)
  local total_unexpected = 0
  for _, thread in ipairs(threads) do
    total_unexpected = total_unexpected + thread:get("unexpected")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"unexpected":%d,"connect":%d,'
      .. '"read":%d,"write":%d,"timeout":%d,"status":%d,"p50_us":%.0f,"p99_us":%.0f,'
      .. '"max_us":%.0f}\n',
    summary.requests, summary.duration, total_unexpected, e.connect, e.read, e.write,
    e.timeout, e.status, latency:percentile(50), latency:percentile(99), latency.max
  ))
end

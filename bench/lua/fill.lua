-- wrk script for bench/scale.sh: fills atrium's queue with a mix of pending jobs,
-- alternately
--   held:      {"wrap": "true", "options": {"gres": "gpu:1", "hold": true}}
--   runnable:  {"wrap": "true", "options": {"gres": "gpu:1", "time": "10"}}
-- The runnable ones stay pending while every GPU is taken (bench/scale.sh starts long
-- jobs on all of them first), so each scheduling pass sees them.
-- At the end it prints one line for bench/scale.sh to parse:
--   submit: requests=N non2xx=N socket_errors=N seconds=S p50_ms=X p99_ms=Y
wrk.method = "POST"
wrk.path = "/api/v1/jobs"
wrk.headers["Content-Type"] = "application/json"

local held = '{"wrap":"true","options":{"gres":"gpu:1","hold":true}}'
local runnable = '{"wrap":"true","options":{"gres":"gpu:1","time":"10"}}'
local n = 0

request = function()
  n = n + 1
  local body = (n % 2 == 0) and held or runnable
  return wrk.format(nil, nil, nil, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("submit: requests=%d non2xx=%d socket_errors=%d seconds=%.3f p50_ms=%.2f p99_ms=%.2f\n",
    summary.requests, e.status, e.connect + e.read + e.write + e.timeout,
    summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end

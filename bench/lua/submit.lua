-- wrk script for bench/jobs.sh: each request submits one held 1-GPU job to atrium,
--   POST /api/v1/jobs {"wrap": "true", "options": {"gres": "gpu:1", "hold": true}}
-- Held, so the queue does not run them: this measures durable submissions only.
-- The bearer token comes from the command line:
--   wrk -t2 -c8 -d10s -H "Authorization: Bearer atr_..." -s bench/lua/submit.lua http://127.0.0.1:PORT/api/v1/jobs
-- At the end it prints one line for bench/jobs.sh to parse:
--   submit: requests=N non2xx=N socket_errors=N seconds=S
wrk.method = "POST"
wrk.path = "/api/v1/jobs"
wrk.body = '{"wrap":"true","options":{"gres":"gpu:1","hold":true}}'
wrk.headers["Content-Type"] = "application/json"

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("submit: requests=%d non2xx=%d socket_errors=%d seconds=%.3f p50_ms=%.2f p99_ms=%.2f\n",
    summary.requests, e.status, e.connect + e.read + e.write + e.timeout,
    summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end

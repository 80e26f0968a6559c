-- wrk script for bench/api_bench.py.
-- wrk -t1 -c8 -d10s -s bench/wrk_bench.lua http://127.0.0.1:PORT -- METHOD KEY BODY PATH [PATH ...]
-- Requests cycle through the PATHs; BODY is sent with POST ("-" for none).
-- done() prints one line "BENCH_JSON {...}" (latencies in microseconds) for the script to parse.

local paths = {}
local counter = 0

function init(args)
  wrk.method = args[1]
  wrk.headers["Authorization"] = "Bearer " .. args[2]
  wrk.headers["Accept"] = "application/json"
  if args[3] ~= "-" then
    wrk.headers["Content-Type"] = "application/json"
    wrk.body = args[3]
  end
  for i = 4, #args do
    paths[#paths + 1] = args[i]
  end
end

function request()
  counter = counter + 1
  return wrk.format(nil, paths[(counter % #paths) + 1])
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests": %d, "duration_us": %d, "connect_errors": %d, "read_errors": %d, '
      .. '"write_errors": %d, "status_errors": %d, "timeouts": %d, '
      .. '"p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, "mean_us": %.1f}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean
  ))
end

-- wrk script of Benchmarks/serve.py. Without SERVE_URLS, wrk sends its one URL (the warm case)
-- and this script only reports. With SERVE_URLS (a file of request paths, one a line), each wrk
-- thread walks the list from its own offset with a stride of SERVE_THREADS, so no two requests of
-- a run ask for the same path until the list runs out ("wrapped" counts the requests sent after
-- that, which repeat earlier paths).
-- At the end one line "SERVEBENCH {json}" carries the counts and latency percentiles (µs).

local threads = {}
local next_index = 0

function setup(thread)
    thread:set("index", next_index)
    next_index = next_index + 1
    table.insert(threads, thread)
end

local list = os.getenv("SERVE_URLS")
if list ~= nil and list ~= "" then
    function init(args)
        paths = {}
        for line in io.lines(list) do
            if line ~= "" then paths[#paths + 1] = line end
        end
        step = tonumber(os.getenv("SERVE_THREADS") or "1")
        position = index + 1
        count = #paths
        sent = 0
    end

    function request()
        local path = paths[position]
        position = position + step
        if position > #paths then
            position = ((position - 1) % #paths) + 1
        end
        sent = sent + 1
        return wrk.format("GET", path)
    end
end

function done(summary, latency, requests)
    -- The threads' strides partition the list, so together they repeat nothing before
    -- they have sent as many requests as it has paths.
    local sent, count = 0, 0
    for _, thread in ipairs(threads) do
        sent = sent + (tonumber(thread:get("sent")) or 0)
        count = tonumber(thread:get("count")) or count
    end
    local wrapped = math.max(0, sent - count)
    if count == 0 then wrapped = 0 end
    local e = summary.errors
    io.write(string.format(
        'SERVEBENCH {"requests": %d, "duration_us": %d, "bytes": %d, "connect_errors": %d, ' ..
        '"read_errors": %d, "write_errors": %d, "status_errors": %d, "timeouts": %d, ' ..
        '"p50_us": %d, "p95_us": %d, "p99_us": %d, "max_us": %d, "mean_us": %.1f, "wrapped": %d}\n',
        summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
        e.timeout, latency:percentile(50), latency:percentile(95), latency:percentile(99),
        latency.max, latency.mean, wrapped))
end

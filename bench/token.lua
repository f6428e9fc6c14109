-- wrk script of bench/run.py: every request is `GET <path>` with `Authorization: Bearer <token>`,
-- the token picked at random, per request, from a file of session tokens (one a line). All HTTP
-- targets of the benchmark get the same requests, so wrk's own cost is the same for each; Envoy's
-- OAuth2 filter gets its own credentials instead, a Cookie header (HEADER "Cookie: ", a file of
-- Cookie values).
--
-- With PAUSE ("5-20": milliseconds), each connection waits a random time in that range before
-- each of its requests (wrk's `delay()`), as callers that call now and then rather than in a hot
-- loop: the load of many users' sessions spread over time, not a closed loop at full speed.
--
--   wrk -t2 -c64 -d5s --latency -s bench/token.lua http://127.0.0.1:PORT -- TOKENS_FILE PATH [HEADER [PAUSE]]

local tokens = {}
local count = 0
local path = "/token"
local header = "Authorization: Bearer "
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_number", threads)
end

function init(args)
  path = args[2] or path
  header = args[3] or header
  for line in io.lines(args[1]) do
    count = count + 1
    tokens[count] = line
  end
  if count == 0 then error("no tokens in " .. args[1]) end
  math.randomseed(os.time() * 1000 + (thread_number or 0))
  if args[4] and args[4] ~= "" then
    -- wrk looks for a global `delay` after init() (script_has_delay): defined here, it applies.
    local low, high = string.match(args[4], "^(%d+)-(%d+)$")
    if not low then error("PAUSE is MIN-MAX in milliseconds, not " .. args[4]) end
    low, high = tonumber(low), tonumber(high)
    function delay()
      return math.random(low, high)
    end
  end
end

function request()
  return "GET " .. path .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n" .. header
    .. tokens[math.random(count)] .. "\r\n\r\n"
end

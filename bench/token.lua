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
-- A line may carry more headers after the token: a tab in it is the line break between them (the
-- DPoP rows: `<token><TAB>DPoP: <proof>`). With PICK "once:N" (N: wrk's threads), each thread
-- sends its own lines in order, each once (a proof is good once), and stops when it has no more.
--
--   wrk -t2 -c64 -d5s --latency -s bench/token.lua http://127.0.0.1:PORT -- TOKENS_FILE PATH [HEADER [PAUSE [PICK]]]

local tokens = {}
local count = 0
local path = "/token"
local header = "Authorization: Bearer "
local threads = 0
local once = false
local next_line = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_number", threads)
end

function init(args)
  path = args[2] or path
  header = args[3] or header
  local stride, own = 1, 0
  if args[5] and args[5] ~= "" then
    local threads_given = string.match(args[5], "^once:(%d+)$")
    if not threads_given then error("PICK is once:THREADS, not " .. args[5]) end
    once, stride, own = true, tonumber(threads_given), (thread_number or 1) - 1
  end
  local index = 0
  for line in io.lines(args[1]) do
    if index % stride == own then
      count = count + 1
      tokens[count] = string.gsub(line, "\t", "\r\n")
    end
    index = index + 1
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
  local line
  if once then
    next_line = next_line + 1
    if next_line > count then
      wrk.thread:stop()
      next_line = count
    end
    line = tokens[next_line]
  else
    line = tokens[math.random(count)]
  end
  return "GET " .. path .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n" .. header .. line .. "\r\n\r\n"
end

-- firstwindow: a fixed window that starts at the key's first request, as
-- ulule/limiter's and rate-limiter-flexible's do, run after Sluice's
-- shared prelude (ext/algorithm/prelude.lua), which has parsed and
-- validated key, rate, period_us, burst, cost and now.
--
-- A key's window opens at its first admitted request and lasts period_us
-- microseconds; it allows `rate` cost units; burst is not used. The next
-- request after the window ends opens a new one.
--
-- State: KEYS[1] holds the string "start:count". A missing key, or a
-- window that has ended, is a count of 0 in a window opening now. A
-- window that starts after now (the clock went back) is kept: the limit
-- looks tighter, never looser.
--
-- Cost > 0 consumes, 0 peeks (would a cost-1 request be allowed?), < 0
-- refunds |cost| in the current window (never below 0).
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; a
-- denied request is allowed when the window ends.
-- Writes: SET PX (until the window ends, plus 1 s) on admission and refund
-- only. O(1): TIME, GET, at most one SET/DEL. Keep in step with model.go.

local TTL_MARGIN_MS = 1000

if cost > rate then
  return redis.error_reply('SLUICE_COST_EXCEEDS_BURST cost exceeds the rate a window allows')
end
if cost < -rate then
  return redis.error_reply('SLUICE_INVALID_COST a refund cannot exceed the rate')
end

local start, count = now, 0
local stored = redis.call('GET', key)
if stored then
  local s, c = string.match(stored, '^(%d+):(%d+)$')
  s, c = tonumber(s), tonumber(c)
  if s == nil or c == nil or s > MAX_NOW_US or c > 1e12 then
    return redis.error_reply('SLUICE_INVALID_STATE key does not hold a first-request window')
  end
  if now < s + period_us then
    start, count = s, c
  end
end
local window_end = start + period_us

local allowed, retry_after, write = 1, 0, false
if cost < 0 then
  if count > 0 then
    count = math.max(count + cost, 0)
    write = true
  end
elseif count + math.max(cost, 1) > rate then
  allowed = 0
  retry_after = window_end - now
elseif cost > 0 and not dry then
  count = count + cost
  write = true
end

if write then
  if count > 0 then
    redis.call('SET', key, string.format('%d:%d', start, count),
      'PX', string.format('%d', math.ceil((window_end - now) / 1000) + TTL_MARGIN_MS))
  else
    redis.call('DEL', key)
  end
end

local reset_after = 0
if count > 0 then
  reset_after = window_end - now
end
return {allowed, math.max(rate - count, 0), retry_after, reset_after}

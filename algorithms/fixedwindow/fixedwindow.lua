-- Sluice fixed window, after the shared prelude
-- (ext/algorithm/prelude.lua), which has parsed and validated key,
-- rate, period_us, burst, cost and now.
--
-- Windows of period_us microseconds are aligned to the Unix epoch; window
-- idx covers [idx x period_us, (idx + 1) x period_us). Each allows `rate`
-- cost units; burst is not used.
--
-- State: KEYS[1] holds the string "start:count", start being the Unix
-- microsecond at which the count's window began (put on this period's grid
-- first, in case a different period wrote it); a missing key or an earlier
-- window means a count of 0. If the stored window is later than now's (the
-- clock went back), it is kept: the limit looks tighter, never looser.
--
-- Cost > 0 consumes, 0 peeks (would a cost-1 request be allowed?), < 0
-- refunds |cost| in the stored window (never below 0).
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; a
-- denied request is allowed at the next window, so retry_after is the time
-- until the window ends.
-- Writes: SET PX (until the window ends, plus 1 s) on admission and refund
-- only; a denial and a peek write nothing. O(1): TIME, GET, at most one
-- SET/DEL. Keep in step with model.go.

local TTL_MARGIN_MS = 1000

if cost > rate then
  return redis.error_reply('SLUICE_COST_EXCEEDS_BURST cost exceeds the rate a window allows, so it can never be allowed')
end
if cost < -rate then
  return redis.error_reply('SLUICE_INVALID_COST a refund cannot exceed the rate')
end

local window = math.floor(now / period_us) * period_us -- its start
local count = 0
local stored = redis.call('GET', key)
if stored then
  local w, c = string.match(stored, '^(%d+):(%d+)$')
  w, c = tonumber(w), tonumber(c)
  if w == nil or c == nil or w > MAX_NOW_US or c > 1e12 then
    return redis.error_reply('SLUICE_INVALID_STATE key does not hold a fixed window')
  end
  w = math.floor(w / period_us) * period_us -- on this period's grid
  if w >= window then
    window, count = w, c
  end
end
local window_end = window + period_us

local allowed = 1
local retry_after = 0
local write = false
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
    redis.call('SET', key, string.format('%d:%d', window, count),
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

-- Sluice GCRA (generic cell rate algorithm), after the shared prelude
-- (ext/algorithm/prelude.lua), which has parsed and validated key,
-- rate, period_us, burst, cost and now.
--
-- State: KEYS[1] holds one integer, the theoretical arrival time ("tat",
-- Unix microseconds) of the next request at the regular rate; a missing
-- key means tat <= now. The emission interval is T = ceil(period_us /
-- rate) microseconds and the tolerance is burst x T: a request of cost n
-- conforms when tat + n x T - now <= burst x T.
--
-- Cost > 0 takes n emission intervals, cost 0 peeks (would a cost-1 request
-- conform?), cost < 0 refunds |cost| intervals (never below now).
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}.
-- Writes: SET PX (time until tat, plus 1 s) on admission and refund only;
-- a denial and a peek write nothing. O(1): TIME, GET, at most one SET/DEL.
-- Keep in step with model.go.

local TTL_MARGIN_MS = 1000

-- Arithmetic is written out (x % y, comparisons) rather than through
-- math.ceil, math.floor and math.max, as in the token bucket: each C call
-- costs several hundred instructions, an operator a few.
local interval = (period_us - period_us % rate) / rate
if interval * rate < period_us then
  interval = interval + 1 -- ceil(period_us / rate)
end
if (interval * rate - period_us) * 100 > period_us then
  return redis.error_reply('SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds')
end
if interval > MAX_FILL_US / burst then
  return redis.error_reply('SLUICE_INVALID_LIMIT burst x period / rate is too long')
end
if cost > burst then
  return redis.error_reply('SLUICE_COST_EXCEEDS_BURST cost exceeds burst, so it can never be allowed')
end
if cost < -burst then
  return redis.error_reply('SLUICE_INVALID_COST a refund cannot exceed burst')
end
local tolerance = burst * interval

local tat = now
local stored = redis.call('GET', key)
if stored then
  local v = tonumber(stored)
  if not (v and v >= 0 and v <= MAX_NOW_US + MAX_FILL_US and v % 1 == 0) then
    return redis.error_reply('SLUICE_INVALID_STATE key does not hold a GCRA state')
  end
  if v > now then
    tat = v
  end
end

local allowed = 1
local retry_after = 0
local write = false
if cost < 0 then
  tat = tat + cost * interval
  if tat < now then
    tat = now
  end
  write = true
else
  local new_tat = tat + interval
  if cost > 1 then
    new_tat = tat + cost * interval
  end
  if new_tat - now > tolerance then
    allowed = 0
    retry_after = new_tat - now - tolerance
  elseif cost > 0 and not dry then
    tat = new_tat
    write = true
  end
end

if write then
  local ahead = tat - now
  if ahead > 0 then
    local ttl_ms = (ahead - ahead % 1000) / 1000 + TTL_MARGIN_MS
    if ahead % 1000 ~= 0 then
      ttl_ms = ttl_ms + 1 -- ceil(ahead / 1000) + TTL_MARGIN_MS
    end
    redis.call('SET', key, string.format('%d', tat), 'PX', string.format('%d', ttl_ms))
  else
    redis.call('DEL', key)
  end
end

local remaining = 0
if tat - now < tolerance then
  local room = tolerance - (tat - now)
  remaining = (room - room % interval) / interval
end
return {allowed, remaining, retry_after, tat - now}

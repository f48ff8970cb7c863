-- Sluice token bucket, after the shared prelude
-- (ext/algorithm/prelude.lua), which has parsed and validated key,
-- rate, period_us, burst, cost and now.
--
-- The bucket holds up to `burst` tokens and refills one token every
-- `interval` = ceil(period_us / rate) microseconds. Its whole state is one
-- integer, the time at which it will be full again ("tat", Unix
-- microseconds); tat - now is its deficit and a missing key is a full
-- bucket. All arithmetic is on integers below 2^53, exact in a Lua number,
-- so the Go model (model.go) computes the very same values, and the key
-- stays small (Redis int-encodes it).
--
-- Cost > 0 takes tokens, 0 peeks (would a cost-1 request be allowed?),
-- < 0 gives |cost| tokens back (never past full).
-- Reply: {allowed (0|1), remaining (tokens), retry_after_us, reset_after_us}.
-- Every write sets PX to the time until the bucket is full plus 1 s; a
-- peek and a denial write nothing. O(1): TIME, GET, at most one SET or DEL.
-- Extra errors, before any write: SLUICE_INVALID_LIMIT (interval not within
-- 1%, fill time too long), SLUICE_COST_EXCEEDS_BURST, SLUICE_INVALID_COST,
-- SLUICE_INVALID_STATE.

local TTL_MARGIN_MS = 1000

local interval = math.ceil(period_us / rate)
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
local tolerance = burst * interval -- microseconds to refill an empty bucket

local deficit = 0
local stored = redis.call('GET', key)
if stored then
  local tat = tonumber(stored)
  if tat == nil or tat ~= math.floor(tat) or tat < 0 or tat > MAX_NOW_US + MAX_FILL_US then
    return redis.error_reply('SLUICE_INVALID_STATE key does not hold a token bucket')
  end
  deficit = math.max(tat - now, 0)
end

local allowed = 1
local retry_after = 0
local write = false
if cost < 0 then
  deficit = math.max(deficit + cost * interval, 0)
  write = true
else
  local after = deficit + math.max(cost, 1) * interval
  if after > tolerance then
    allowed = 0
    retry_after = after - tolerance
  elseif cost > 0 and not dry then
    deficit = after
    write = true
  end
end

if write then
  if deficit > 0 then
    redis.call('SET', key, string.format('%d', now + deficit),
      'PX', string.format('%d', math.ceil(deficit / 1000) + TTL_MARGIN_MS))
  else
    redis.call('DEL', key)
  end
end

local remaining = 0
if deficit < tolerance then
  remaining = math.floor((tolerance - deficit) / interval)
end
return {allowed, remaining, retry_after, deficit}

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

-- Arithmetic is written out (x % y, comparisons) rather than through
-- math.ceil, math.floor and math.max: each C call costs several hundred
-- instructions, an operator a few, and the results are the same integers.
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
local tolerance = burst * interval -- microseconds to refill an empty bucket

local deficit = 0
local stored = redis.call('GET', key)
if stored then
  local tat = tonumber(stored)
  if not (tat and tat >= 0 and tat <= MAX_NOW_US + MAX_FILL_US and tat % 1 == 0) then
    return redis.error_reply('SLUICE_INVALID_STATE key does not hold a token bucket')
  end
  if tat > now then
    deficit = tat - now
  end
end

local allowed = 1
local retry_after = 0
local write = false
if cost < 0 then
  deficit = deficit + cost * interval
  if deficit < 0 then
    deficit = 0
  end
  write = true
else
  local after = deficit + interval
  if cost > 1 then
    after = deficit + cost * interval
  end
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
    -- string.format('%d') rather than the numbers themselves: redis.call
    -- turns a number into text with '%.17g', a floating-point conversion
    -- that costs more than an integer one.
    local ttl_ms = (deficit - deficit % 1000) / 1000 + TTL_MARGIN_MS
    if deficit % 1000 ~= 0 then
      ttl_ms = ttl_ms + 1 -- ceil(deficit / 1000) + TTL_MARGIN_MS
    end
    redis.call('SET', key, string.format('%d', now + deficit), 'PX', string.format('%d', ttl_ms))
  else
    redis.call('DEL', key)
  end
end

local remaining = 0
if deficit < tolerance then
  local room = tolerance - deficit
  remaining = (room - room % interval) / interval
end
return {allowed, remaining, retry_after, deficit}

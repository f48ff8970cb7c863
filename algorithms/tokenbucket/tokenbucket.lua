-- Sluice token bucket: one atomic decision.
--
-- The bucket holds up to `burst` tokens and refills one token every
-- `interval` = ceil(period_us / rate) microseconds. Its whole state is one
-- integer, the time at which it will be full again ("tat", Unix
-- microseconds); tat - now is its deficit. All arithmetic is on integers
-- below 2^53, exact in a Lua number, so the Go model (model.go) computes the
-- very same values, and the key stays small (Redis int-encodes it).
--
-- KEYS[1]  the bucket key (non-empty)
-- ARGV[1]  rate       tokens per period, integer in [1, min(period_us, 1e12)],
--                     with ceil(period_us / rate) within 1% of period_us / rate
-- ARGV[2]  period_us  period in microseconds, integer in [1000, 31622400000000]
-- ARGV[3]  burst      capacity in tokens, integer in [1, 1e12]
-- ARGV[4]  cost       tokens to take, integer in [0, burst]; 0 peeks
-- ARGV[5]  now_us     optional, Unix microseconds; absent or "" reads the
--                     server clock (TIME)
--
-- Reply: {allowed (0|1), remaining (tokens), retry_after_us, reset_after_us}.
-- A peek (cost 0) reports whether a cost-1 request would be allowed now.
-- A peek and a denial write nothing.
--
-- Every write sets PX to the time until the bucket is full plus 1 s: a
-- missing key is a full bucket, so idle keys vanish. O(1): TIME, GET and at
-- most one SET. Numbers are never turned into strings with tostring or '..'
-- (14 significant digits); string.format('%d') keeps all 16.
--
-- Errors, always before any write: SLUICE_INVALID_KEY, SLUICE_INVALID_LIMIT,
-- SLUICE_INVALID_COST, SLUICE_COST_EXCEEDS_BURST, SLUICE_INVALID_STATE.

local MAX_FILL_US = 316224000000000 -- 10 x 366 days
local MAX_NOW_US = 4102444800000000 -- 2100-01-01
local TTL_MARGIN_MS = 1000

local function int_arg(i, lo, hi)
  local v = tonumber(ARGV[i])
  if v == nil or v ~= v or v < lo or v > hi or v ~= math.floor(v) then
    return nil
  end
  return v
end

local key = KEYS[1]
if #KEYS ~= 1 or key == '' then
  return redis.error_reply('SLUICE_INVALID_KEY one non-empty key expected')
end
if #ARGV ~= 4 and #ARGV ~= 5 then
  return redis.error_reply('SLUICE_INVALID_LIMIT 4 or 5 arguments expected')
end
local period_us = int_arg(2, 1000, 31622400000000)
local rate = int_arg(1, 1, math.min(period_us or 0, 1e12))
local burst = int_arg(3, 1, 1e12)
if rate == nil or period_us == nil or burst == nil then
  return redis.error_reply('SLUICE_INVALID_LIMIT rate, period_us and burst must be integers in range')
end
local interval = math.ceil(period_us / rate)
if (interval * rate - period_us) * 100 > period_us then
  return redis.error_reply('SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds')
end
if interval > MAX_FILL_US / burst then
  return redis.error_reply('SLUICE_INVALID_LIMIT burst x period / rate is too long')
end
local tolerance = burst * interval -- microseconds to refill an empty bucket
local cost = int_arg(4, 0, 1e12)
if cost == nil then
  return redis.error_reply('SLUICE_INVALID_COST cost must be an integer in [0, burst]')
end
if cost > burst then
  return redis.error_reply('SLUICE_COST_EXCEEDS_BURST cost exceeds burst, so it can never be allowed')
end

local now
if ARGV[5] == nil or ARGV[5] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = int_arg(5, 0, MAX_NOW_US)
  if now == nil then
    return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
  end
end

local deficit = 0
local stored = redis.call('GET', key)
if stored then
  local tat = tonumber(stored)
  if tat == nil or tat ~= math.floor(tat) or tat < 0 or tat > MAX_NOW_US + MAX_FILL_US then
    return redis.error_reply('SLUICE_INVALID_STATE key does not hold a token bucket')
  end
  deficit = tat - now
  if deficit < 0 then
    deficit = 0
  end
end

local need = cost
if need == 0 then
  need = 1
end

local allowed = 0
local retry_after = 0
local after = deficit + need * interval
if after <= tolerance then
  allowed = 1
  if cost > 0 then
    deficit = after
    redis.call('SET', key, string.format('%d', now + deficit),
      'PX', string.format('%d', math.ceil(deficit / 1000) + TTL_MARGIN_MS))
  end
else
  retry_after = after - tolerance
end

local remaining = 0
if deficit < tolerance then
  remaining = math.floor((tolerance - deficit) / interval)
end

return {allowed, remaining, retry_after, deficit}

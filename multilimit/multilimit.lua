-- Sluice atomic multi-limit over token buckets: one request checked
-- against several limits at once, all or nothing.
--
-- KEYS[1..m]  the buckets' keys (token bucket state: the caller's key plus
--             ":tb", so a bucket is shared with tokenbucket.Limiter); all
--             in one Redis Cluster slot
-- ARGV[1]     cost, integer in [0, min(burst)]; 0 peeks
-- ARGV[2]     m, the number of limits, integer in [1, 16]
-- ARGV[3..]   per limit: rate, period_us, burst (as tokenbucket.lua)
-- ARGV[3+3m]  optional now_us; absent or "" reads the server clock (TIME)
--
-- Reply: {allowed (0|1), denied (1-based index of the first limit that
-- denied, 0 if none), then per limit: remaining, retry_after_us,
-- reset_after_us}. Only when every limit allows does the script write, to
-- every bucket (SET PX, as tokenbucket.lua); otherwise nothing changes.
-- Keep in step with model.go.

local MAX_NOW_US = 4102444800000000
local MAX_FILL_US = 316224000000000
local TTL_MARGIN_MS = 1000

local function int_arg(i, lo, hi)
  local v = tonumber(ARGV[i])
  if v == nil or v ~= v or v < lo or v > hi or v ~= math.floor(v) then
    return nil
  end
  return v
end

local cost = int_arg(1, 0, 1e12)
if cost == nil then
  return redis.error_reply('SLUICE_INVALID_COST cost must be an integer')
end
local m = int_arg(2, 1, 16)
if m == nil or #KEYS ~= m then
  return redis.error_reply('SLUICE_INVALID_KEY one key per limit expected (1 to 16)')
end
if #ARGV ~= 2 + 3 * m and #ARGV ~= 3 + 3 * m then
  return redis.error_reply('SLUICE_INVALID_LIMIT 3 arguments per limit expected')
end
for i = 1, m do
  if KEYS[i] == '' then
    return redis.error_reply('SLUICE_INVALID_KEY keys must not be empty')
  end
end

local limits = {}
for i = 1, m do
  local base = 2 + 3 * (i - 1)
  local period_us = int_arg(base + 2, 1000, 31622400000000)
  local rate = int_arg(base + 1, 1, math.min(period_us or 0, 1e12))
  local burst = int_arg(base + 3, 1, 1e12)
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
  if cost > burst then
    return redis.error_reply('SLUICE_COST_EXCEEDS_BURST cost exceeds a burst, so it can never be allowed')
  end
  limits[i] = {interval = interval, tolerance = burst * interval}
end

local now
local now_arg = 3 + 3 * m
if ARGV[now_arg] == nil or ARGV[now_arg] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = int_arg(now_arg, 0, MAX_NOW_US)
  if now == nil then
    return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
  end
end

local need = math.max(cost, 1)
local allowed, denied = 1, 0
for i = 1, m do
  local l = limits[i]
  l.deficit = 0
  local stored = redis.call('GET', KEYS[i])
  if stored then
    local tat = tonumber(stored)
    if tat == nil or tat ~= math.floor(tat) or tat < 0 or tat > MAX_NOW_US + MAX_FILL_US then
      return redis.error_reply('SLUICE_INVALID_STATE key does not hold a token bucket')
    end
    l.deficit = math.max(tat - now, 0)
  end
  l.after = l.deficit + need * l.interval
  if l.after > l.tolerance then
    l.retry = l.after - l.tolerance
    if allowed == 1 then
      allowed, denied = 0, i
    end
  else
    l.retry = 0
  end
end

local reply = {allowed, denied}
for i = 1, m do
  local l = limits[i]
  if allowed == 1 then
    l.retry = 0
    if cost > 0 then
      l.deficit = l.after
      redis.call('SET', KEYS[i], string.format('%d', now + l.deficit),
        'PX', string.format('%d', math.ceil(l.deficit / 1000) + TTL_MARGIN_MS))
    end
  end
  local remaining = 0
  if l.deficit < l.tolerance then
    remaining = math.floor((l.tolerance - l.deficit) / l.interval)
  end
  reply[#reply + 1] = remaining
  reply[#reply + 1] = l.retry
  reply[#reply + 1] = l.deficit
end
return reply

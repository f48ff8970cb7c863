-- Sluice sliding window log, after the shared prelude
-- (ext/algorithm/prelude.lua), which has parsed and validated key,
-- rate, period_us, burst, cost and now.
--
-- State: KEYS[1] is a sorted set with one member per admitted cost unit,
-- scored by its time in Unix microseconds. The window is (now - period_us,
-- now]; a request of cost n is allowed when the members in it plus n are
-- at most rate (burst is not used). Members are "<now>-<seq>", seq
-- zero-padded and counted from the members already at that microsecond,
-- so that two requests in the same microsecond never collide and ZPOPMAX
-- takes the newest first. rate is at most 10000, which bounds the set.
--
-- Cost > 0 consumes, 0 peeks (would a cost-1 request be allowed?), < 0
-- refunds |cost| (the newest members in the window go).
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us};
-- retry_after is when enough members leave the window for the request.
-- Writes on admission (ZREMRANGEBYSCORE of members out of the window,
-- ZADD, PEXPIRE until the newest member leaves plus 1 s) and refund only; a
-- denial and a peek only read. O(log N + cost) for N members, N <= rate.
-- Keep in step with model.go.

local MAX_LOG_RATE = 10000
local TTL_MARGIN_MS = 1000

if rate > MAX_LOG_RATE then
  return redis.error_reply('SLUICE_INVALID_LIMIT a sliding log allows a rate of at most 10000 per period')
end
if cost > rate then
  return redis.error_reply('SLUICE_COST_EXCEEDS_BURST cost exceeds the rate a window allows, so it can never be allowed')
end
if cost < -rate then
  return redis.error_reply('SLUICE_INVALID_COST a refund cannot exceed the rate')
end

local oldest_out = string.format('%d', now - period_us) -- members scored at or before this are out
local in_window = '(' .. oldest_out
local count = redis.call('ZCOUNT', key, in_window, '+inf')

local allowed = 1
local retry_after = 0
local write = false
if cost < 0 then
  local n = math.min(-cost, count)
  if n > 0 then
    redis.call('ZPOPMAX', key, n)
    count = count - n
  end
  write = true
elseif count + math.max(cost, 1) > rate then
  allowed = 0
  -- The request fits once this many of the oldest members have left.
  local leaving = count + math.max(cost, 1) - rate
  local m = redis.call('ZRANGEBYSCORE', key, in_window, '+inf', 'WITHSCORES', 'LIMIT', leaving - 1, 1)
  retry_after = tonumber(m[2]) + period_us - now
elseif cost > 0 and not dry then
  -- ZADD is the first write: over maxmemory Redis refuses it (and so the
  -- script) before anything is written; a cleanup first would let it by.
  local at = string.format('%d', now)
  local seq = redis.call('ZCOUNT', key, at, at)
  local args = {}
  for i = 0, cost - 1 do
    args[#args + 1] = at
    args[#args + 1] = string.format('%d-%05d', now, seq + i)
    if #args >= 1000 then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then
    redis.call('ZADD', key, unpack(args))
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', oldest_out)
  count = count + cost
  write = true
end

local reset_after = 0
if count > 0 then
  local newest = redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')
  reset_after = tonumber(newest[2]) + period_us - now
end
if write then
  if count > 0 then
    redis.call('PEXPIRE', key, string.format('%d', math.ceil(reset_after / 1000) + TTL_MARGIN_MS))
  else
    redis.call('DEL', key)
  end
end
return {allowed, math.max(rate - count, 0), retry_after, reset_after}

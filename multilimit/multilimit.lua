-- Sluice atomic multi-limit: one request checked against several limits,
-- each with its own algorithm, all or nothing.
--
-- KEYS[1..m]  the limits' state keys: each the caller's key plus its
--             algorithm's suffix (":tb", ":gcra", ...), so a limit's state
--             is the one its algorithm's own Limiter keeps; all distinct,
--             all in one Redis Cluster slot
-- ARGV[1]     cost, integer in [0, 1e12]; 0 peeks
-- ARGV[2]     m, the number of limits, integer in [1, 16]
-- ARGV[3..]   per limit: algorithm (1-based index in multilimit.go's
--             algorithms, whose functions it writes at the DEFINE line
--             below), rate, period_us, burst (as prelude.lua)
-- ARGV[3+4m]  optional now_us; absent or "" reads the server clock (TIME)
--
-- Each number in decimal, or, when ARGV[1] starts with 0x, each one as 0x
-- and hex digits (prelude.lua says why).
--
-- Each algorithm's decision code is inlined below as a function: an
-- algorithm given as steps as its step function (ext/algorithm
-- step_function.lua), which reads its key once for both passes, the
-- others as their body (the text after prelude.lua in their own script).
-- Pass 1 runs every limit dry: each decides the cost against its state
-- and writes nothing. Only if every limit allows does pass 2 run them
-- again, for real; the script is atomic, now is fixed and every limit has
-- its own key, so pass 2 decides as pass 1 did.
--
-- Reply: {allowed (0|1), denied (1-based index of the first limit that
-- denied, 0 if none), then per limit: remaining, retry_after_us,
-- reset_after_us}, each as its algorithm's own script replies (dry when
-- the request was denied: remaining is then what is left, unconsumed).
-- Keep in step with model.go.

-- now is the server's clock (TIME), not one passed in; the bodies read
-- it (ext/algorithm state_text.lua).
local server_clock = false

-- ALGORITHMS: local algorithms (how many), local stepped ({[id] = true} for steps)

-- The checks are written out, as in prelude.lua: a Lua function call
-- costs about 1,600 instructions. A number in hex that is out of range
-- (or a decimal negative, which strtoul wraps) is read again as decimal,
-- as gopher-lua (miniredis) needs for a 0x prefix.
local tonumber = tonumber
local a1 = ARGV[1]
local hex = type(a1) == 'string' and string.byte(a1, 2) == 120
local cost = hex and tonumber(a1, 16)
if not (cost and cost <= 1e12) then
  cost = tonumber(a1)
end
if not (cost and cost >= 0 and cost <= 1e12 and cost % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_COST cost must be an integer')
end
local m = hex and ARGV[2] and tonumber(ARGV[2], 16) -- Lua 5.1's tonumber(nil, 16) raises
if not (m and m <= 16) then
  m = tonumber(ARGV[2])
end
if not (m and m >= 1 and m <= 16 and m % 1 == 0) or #KEYS ~= m then
  return redis.error_reply('SLUICE_INVALID_KEY one key per limit expected (1 to 16)')
end
local nargs = #ARGV
if nargs ~= 2 + 4 * m and nargs ~= 3 + 4 * m then
  return redis.error_reply('SLUICE_INVALID_LIMIT 4 arguments per limit expected')
end
for i = 1, m do
  if KEYS[i] == '' then
    return redis.error_reply('SLUICE_INVALID_KEY keys must not be empty')
  end
  for j = 1, i - 1 do
    if KEYS[j] == KEYS[i] then
      return redis.error_reply('SLUICE_INVALID_KEY two limits of one call share a state key')
    end
  end
end

-- limits: per limit, its algorithm, rate, period_us and burst, at
-- 4 x (i - 1) + 1 to 4 (made at its size, the text replaced by numbers: a
-- table that grows is copied at each power of two); bodies: the function
-- of each algorithm used.
local limits, bodies = {unpack(ARGV, 3, 2 + 4 * m)}, {}
for b = 3, 2 + 4 * m, 4 do
  local id, rate, period_us, burst
  if hex then
    id, rate, period_us, burst = tonumber(ARGV[b], 16), tonumber(ARGV[b + 1], 16), tonumber(ARGV[b + 2], 16), tonumber(ARGV[b + 3], 16)
  end
  if not (id and id <= 1e12 and rate and rate <= 1e12 and period_us and period_us <= 31622400000000 and burst and burst <= 1e12) then
    id, rate, period_us, burst = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  end
  if not (id and id >= 1 and id <= algorithms and id % 1 == 0
      and period_us and period_us >= 1000 and period_us <= 31622400000000 and period_us % 1 == 0
      and rate and rate >= 1 and rate <= period_us and rate <= 1e12 and rate % 1 == 0
      and burst and burst >= 1 and burst <= 1e12 and burst % 1 == 0) then
    return redis.error_reply('SLUICE_INVALID_LIMIT algorithm, rate, period_us and burst must be integers in range')
  end
  limits[b - 2], limits[b - 1], limits[b], limits[b + 1] = id, rate, period_us, burst
  if not bodies[id] then
    -- Only the algorithms a call uses become functions: making one (a
    -- closure and its upvalues) costs, and feeds the garbage collector.
-- DEFINE: bodies[id] = function ... end, for each id
  end
end

local now = ARGV[3 + 4 * m]
if now == nil or now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2] -- strings of digits, converted by the arithmetic
  server_clock = true
else
  now = hex and tonumber(now, 16) or tonumber(now)
  if not (now and now >= 0 and now <= MAX_NOW_US and now % 1 == 0) then
    return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
  end
end

-- The reply, filled in as the limits are decided: limit i's figures at
-- 3i to 3i + 2.
local reply = {1, 0}
local raws = {} -- limit i's string read by its step function's dry pass
for i = 1, m do
  local b = 4 * (i - 1)
  local id = limits[b + 1]
  local fail, allowed, remaining, retry_after, reset_after
  if stepped[id] then
    fail, allowed, remaining, retry_after, reset_after, raws[i] =
      bodies[id](KEYS[i], false, limits[b + 2], limits[b + 3], limits[b + 4], cost, now, true)
    if fail then
      return redis.error_reply(fail)
    end
  else
    local r = bodies[id](KEYS[i], limits[b + 2], limits[b + 3], limits[b + 4], cost, now, true)
    if r.err then
      return r
    end
    allowed, remaining, retry_after, reset_after = r[1], r[2], r[3], r[4]
  end
  if allowed == 0 and reply[1] == 1 then
    reply[1], reply[2] = 0, i
  end
  reply[3 * i], reply[3 * i + 1], reply[3 * i + 2] = remaining, retry_after, reset_after
end
if reply[1] == 1 and cost > 0 then
  for i = 1, m do
    local b = 4 * (i - 1)
    local id = limits[b + 1]
    local fail, allowed, remaining, retry_after, reset_after
    if stepped[id] then
      fail, allowed, remaining, retry_after, reset_after =
        bodies[id](KEYS[i], raws[i], limits[b + 2], limits[b + 3], limits[b + 4], cost, now, false)
    else
      local r = bodies[id](KEYS[i], limits[b + 2], limits[b + 3], limits[b + 4], cost, now, false)
      fail, allowed, remaining, retry_after, reset_after = r.err, r[1], r[2], r[3], r[4]
    end
    if fail or allowed ~= 1 then
      -- Unreachable: pass 1 allowed this limit on the same state.
      return redis.error_reply('SLUICE_INTERNAL limit ' .. string.format('%d', i) .. ' decided differently on its second pass')
    end
    reply[3 * i], reply[3 * i + 1], reply[3 * i + 2] = remaining, retry_after, reset_after
  end
end
return reply

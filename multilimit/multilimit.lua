-- Sluice atomic multi-limit: one request checked against several limits,
-- each with its own algorithm, all or nothing.
--
-- KEYS[1..m]  the limits' state keys: each the caller's key plus its
--             algorithm's suffix (":tb", ":gcra", ...), so a limit's state
--             is the one its algorithm's own Limiter keeps; all distinct,
--             all in one Redis Cluster slot
-- ARGV[1]     cost, integer in [0, 1e12]; 0 peeks
-- ARGV[2]     m, the number of limits, integer in [1, 16]
-- ARGV[3..]   per limit: algorithm (1-based index in the list that
--             multilimit.go puts in place of the ALGORITHMS line below),
--             rate, period_us, burst (as prelude.lua)
-- ARGV[3+4m]  optional now_us; absent or "" reads the server clock (TIME)
--
-- Each algorithm's body (the text after prelude.lua in its own script)
-- is inlined below as a function of the prelude's locals. Pass 1 runs
-- every body dry: each decides the cost against its state and writes
-- nothing. Only if every limit allows does pass 2 run them again, for
-- real; the script is atomic, now is fixed and every limit has its own
-- key, so pass 2 decides as pass 1 did.
--
-- Reply: {allowed (0|1), denied (1-based index of the first limit that
-- denied, 0 if none), then per limit: remaining, retry_after_us,
-- reset_after_us}, each as its algorithm's own script replies (dry when
-- the request was denied: remaining is then what is left, unconsumed).
-- Keep in step with model.go.

-- now is the server's clock (TIME), not one passed in; the bodies read
-- it (ext/algorithm state_text.lua).
local server_clock = false

-- ALGORITHMS: local function body_<name>(key, rate, period_us, burst, cost, now, dry) ... end,
-- one per algorithm, and local bodies = {body_<name>, ...}

local cost = int_arg(1, 0, 1e12)
if cost == nil then
  return redis.error_reply('SLUICE_INVALID_COST cost must be an integer')
end
local m = int_arg(2, 1, 16)
if m == nil or #KEYS ~= m then
  return redis.error_reply('SLUICE_INVALID_KEY one key per limit expected (1 to 16)')
end
if #ARGV ~= 2 + 4 * m and #ARGV ~= 3 + 4 * m then
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

local limits = {}
for i = 1, m do
  local base = 2 + 4 * (i - 1)
  local body = bodies[int_arg(base + 1, 1, #bodies) or 0]
  local period_us = int_arg(base + 3, 1000, 31622400000000)
  local rate = int_arg(base + 2, 1, math.min(period_us or 0, 1e12))
  local burst = int_arg(base + 4, 1, 1e12)
  if body == nil or rate == nil or period_us == nil or burst == nil then
    return redis.error_reply('SLUICE_INVALID_LIMIT algorithm, rate, period_us and burst must be integers in range')
  end
  limits[i] = {body = body, rate = rate, period_us = period_us, burst = burst}
end

local now_arg = 3 + 4 * m
local now
if ARGV[now_arg] == nil or ARGV[now_arg] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  server_clock = true
else
  now = int_arg(now_arg, 0, MAX_NOW_US)
end
if now == nil then
  return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
end

local function run(i, dry)
  local l = limits[i]
  return l.body(KEYS[i], l.rate, l.period_us, l.burst, cost, now, dry)
end

local replies = {}
local allowed, denied = 1, 0
for i = 1, m do
  local r = run(i, true)
  if r.err then
    return r
  end
  if r[1] == 0 and allowed == 1 then
    allowed, denied = 0, i
  end
  replies[i] = r
end
if allowed == 1 and cost > 0 then
  for i = 1, m do
    local r = run(i, false)
    if r.err or r[1] ~= 1 then
      -- Unreachable: pass 1 allowed this limit on the same state.
      return redis.error_reply('SLUICE_INTERNAL limit ' .. string.format('%d', i) .. ' decided differently on its second pass')
    end
    replies[i] = r
  end
end

local reply = {allowed, denied}
for i = 1, m do
  local r = replies[i]
  reply[#reply + 1] = r[2]
  reply[#reply + 1] = r[3]
  reply[#reply + 1] = r[4]
end
return reply

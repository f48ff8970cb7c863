-- Sluice batch: many independent decisions of one algorithm in one script,
-- each as the algorithm's own script would decide it, at one instant.
--
-- KEYS[1..m]  the state keys (on Redis Cluster, all in one slot)
-- ARGV[1]     m, integer in [1, 256]
-- ARGV[2..]   per request: rate, period_us, burst, cost (as prelude.lua)
-- ARGV[2+4m]  optional now_us; absent or "" reads the server clock (TIME)
--
-- Reply: per request, the body's {allowed, remaining, retry_after_us,
-- reset_after_us}, or {-1, code, 0, 0} if that request was rejected
-- before anything was written for it (its arguments, or its key holding
-- data of another kind); code: 1 SLUICE_INVALID_LIMIT, 2
-- SLUICE_INVALID_COST, 3 SLUICE_COST_EXCEEDS_BURST, 4 SLUICE_INVALID_KEY,
-- 5 SLUICE_INVALID_STATE or WRONGTYPE, 6 anything else, 7 OOM (Redis over
-- maxmemory refused the request's first write). Keep in step with batch.go.

-- A key that appears once in the batch is decided by body_direct, on redis
-- itself. A key that appears more than once is decided by body_cached,
-- the same body whose GET, SET and DEL go through the shadow of redis
-- below: a key that an earlier request of the batch read or wrote is
-- served from memory, and its last write reaches Redis once, at the end.
-- A hot key's requests then cost one GET and one SET per batch instead of
-- one each. Decisions and the final state are unchanged: the script runs
-- alone, so nothing else touches the keys meanwhile, and `now` is fixed.
-- Any other command on a key first sends that key's pending write and
-- forgets what was cached.

-- BODY_DIRECT: local function body_direct(key, rate, period_us, burst, cost, now, dry) ... end

local server = redis
local cached = {}  -- key -> the value a GET would return (false: none)
local pending = {} -- key -> the last write not yet sent: {'SET', args...} or {'DEL'}
local written = {} -- keys with a pending write, in the order first written

local function send(key)
  local w = pending[key]
  if w then
    pending[key] = nil
    server.call(w[1], key, unpack(w, 2))
  end
end

local function hold(key, write)
  if pending[key] == nil then
    written[#written + 1] = key
  end
  pending[key] = write
end

local redis = setmetatable({
  call = function(cmd, key, ...)
    if cmd == 'GET' then
      local v = cached[key]
      if v == nil then
        v = server.call('GET', key) -- WRONGTYPE raises here, as it would
        cached[key] = v
      end
      return v
    elseif cmd == 'SET' then
      -- Only the form the bodies use: anything else (NX, XX, GET, KEEPTTL)
      -- would need Redis's answer, so it fails loudly instead.
      local v, px, ms = ...
      if select('#', ...) ~= 3 or px ~= 'PX' then
        error('SLUICE_BATCH_CACHE a body in a batch may only SET key value PX ms')
      end
      cached[key] = v
      hold(key, {'SET', v, 'PX', ms})
      return {ok = 'OK'}
    elseif cmd == 'DEL' then
      if select('#', ...) ~= 0 then
        error('SLUICE_BATCH_CACHE a body in a batch may only DEL one key')
      end
      cached[key] = false
      hold(key, {'DEL'})
      return 1
    end
    if key == nil then
      return server.call(cmd)
    end
    send(key)
    cached[key] = nil
    return server.call(cmd, key, ...)
  end,
  pcall = function()
    error('SLUICE_BATCH_CACHE a body in a batch may not use redis.pcall')
  end,
}, {__index = server})

-- BODY_CACHED: local function body_cached(key, rate, period_us, burst, cost, now, dry) ... end

local ERROR_CODES = {
  {'SLUICE_INVALID_LIMIT', 1}, {'SLUICE_INVALID_COST', 2}, {'SLUICE_COST_EXCEEDS_BURST', 3},
  {'SLUICE_INVALID_KEY', 4}, {'SLUICE_INVALID_STATE', 5}, {'WRONGTYPE', 5}, {'OOM', 7},
}
local function error_code(e)
  local msg = type(e) == 'table' and e.err or tostring(e)
  for _, c in ipairs(ERROR_CODES) do
    if string.find(msg, c[1], 1, true) then
      return c[2]
    end
  end
  return 6
end

local m = int_arg(1, 1, 256)
if m == nil or #KEYS ~= m then
  return redis.error_reply('SLUICE_INVALID_KEY one key per request expected (1 to 256)')
end
if #ARGV ~= 1 + 4 * m and #ARGV ~= 2 + 4 * m then
  return redis.error_reply('SLUICE_INVALID_LIMIT 4 arguments per request expected')
end
local now_arg = 2 + 4 * m
local now
if ARGV[now_arg] == nil or ARGV[now_arg] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = int_arg(now_arg, 0, MAX_NOW_US)
end
if now == nil then
  return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
end

local repeated = {}
do
  local seen = {}
  for i = 1, m do
    local k = KEYS[i]
    if seen[k] then
      repeated[k] = true
    else
      seen[k] = true
    end
  end
end

local reply, n = {}, 0
local limit_args -- the previous request's rate, period and burst, parsed once
local rate, period_us, burst
local cost_arg, cost -- likewise the previous request's cost
for i = 1, m do
  local base = 1 + 4 * (i - 1)
  if limit_args == nil or ARGV[base + 1] ~= limit_args[1] or ARGV[base + 2] ~= limit_args[2] or ARGV[base + 3] ~= limit_args[3] then
    period_us = int_arg(base + 2, 1000, 31622400000000)
    rate = int_arg(base + 1, 1, math.min(period_us or 0, 1e12))
    burst = int_arg(base + 3, 1, 1e12)
    limit_args = {ARGV[base + 1], ARGV[base + 2], ARGV[base + 3]}
  end
  if ARGV[base + 4] ~= cost_arg then
    cost_arg = ARGV[base + 4]
    cost = int_arg(base + 4, -1e12, 1e12)
  end
  local ok, r
  if KEYS[i] == '' then
    ok, r = true, {err = 'SLUICE_INVALID_KEY'}
  elseif rate == nil or period_us == nil or burst == nil then
    ok, r = true, {err = 'SLUICE_INVALID_LIMIT'}
  elseif cost == nil then
    ok, r = true, {err = 'SLUICE_INVALID_COST'}
  else
    -- pcall: a key holding another type (WRONGTYPE) fails its request
    -- only; bodies read before they write, so nothing was written for it.
    local body = repeated[KEYS[i]] and body_cached or body_direct
    ok, r = pcall(body, KEYS[i], rate, period_us, burst, cost, now, false)
  end
  if not ok or r.err then
    reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = -1, error_code(r), 0, 0
  else
    reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = r[1], r[2], r[3], r[4]
  end
  n = n + 4
end
for _, key in ipairs(written) do
  send(key)
end
return reply

-- Sluice batch of an algorithm's body: many independent decisions of one
-- algorithm in one script, each as the algorithm's own script would decide
-- it, at one instant. Arguments and reply: batch_args.lua, which runs
-- first.

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

-- error_code returns the batch code of an error (a reply table or text).
-- The pairs are built on the way to a failure only: a table constructor
-- per call would cost every batch.
local function error_code(e)
  local msg = type(e) == 'table' and e.err or tostring(e)
  for _, c in ipairs({
    {'SLUICE_INVALID_LIMIT', 1}, {'SLUICE_INVALID_COST', 2}, {'SLUICE_COST_EXCEEDS_BURST', 3},
    {'SLUICE_INVALID_KEY', 4}, {'SLUICE_INVALID_STATE', 5}, {'WRONGTYPE', 5}, {'OOM', 7},
  }) do
    if string.find(msg, c[1], 1, true) then
      return c[2]
    end
  end
  return 6
end

-- read_shape returns shape j's rate, period_us, burst and cost, and the
-- code its requests fail with (nil when it is in range), checked as the
-- prelude checks a decision's arguments. Called once per run of requests
-- of one shape.
local function read_shape(j)
  local b = 1 + 4 * (j - 1)
  local rate, period_us, burst, cost = args[b + 1], args[b + 2], args[b + 3], args[b + 4]
  if not (period_us and period_us >= 1000 and period_us <= 31622400000000 and period_us % 1 == 0
      and rate and rate >= 1 and rate <= period_us and rate <= 1e12 and rate % 1 == 0
      and burst and burst >= 1 and burst <= 1e12 and burst % 1 == 0) then
    return rate, period_us, burst, cost, 1
  elseif not (cost and cost >= -1e12 and cost <= 1e12 and cost % 1 == 0) then
    return rate, period_us, burst, cost, 2
  end
  return rate, period_us, burst, cost, nil
end

local uses = {} -- key index -> requests on it
if implicit then
  uses[1] = m / nkeys -- one key for all, or one each
  for k = 2, nkeys do
    uses[k] = 1
  end
else
  local last, k
  for i = 1, m do
    local v = args[refs + i]
    if v ~= last then
      k = (v - v % 256) / 256 + 1
      last = v
    end
    uses[k] = (uses[k] or 0) + 1
  end
end

local last, k, sh -- the last reference read, and the key and shape it names
local shape, rate, period_us, burst, cost, code -- the shape read last
for i = 1, m do
  if implicit then
    k, sh = i, 1
    if nkeys == 1 then
      k = 1
    end
  else
    local v = args[refs + i]
    if v ~= last then
      sh = v % 256
      k = (v - sh) / 256 + 1
      sh = sh + 1
      last = v
    end
  end
  if sh ~= shape then
    rate, period_us, burst, cost, code = read_shape(sh)
    shape = sh
  end
  local key = KEYS[k]
  if key == '' then
    n = n + 1
    reply[n] = -4
  elseif code then
    n = n + 1
    reply[n] = -code
  else
    -- pcall: a key holding another type (WRONGTYPE) fails its request
    -- only; bodies read before they write, so nothing was written for it.
    local body = uses[k] > 1 and body_cached or body_direct
    local ok, r = pcall(body, key, rate, period_us, burst, cost, now, false)
    if not ok or r.err then
      n = n + 1
      reply[n] = -error_code(r)
    elseif r[3] ~= 0 then
      reply[n + 1], reply[n + 2], reply[n + 3] = r[2] * 4 + 2 + r[1], r[4], r[3]
      n = n + 3
    else
      reply[n + 1], reply[n + 2] = r[2] * 4 + r[1], r[4]
      n = n + 2
    end
  end
end
for _, key in ipairs(written) do
  send(key)
end
return reply

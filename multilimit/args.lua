-- Sluice atomic multi-limit, its arguments: one request checked against
-- several limits, each with its own algorithm, all or nothing. Both
-- scripts (multilimit.lua, and multistep.lua for limits whose algorithms
-- are all given as steps) start here.
--
-- KEYS[1..m]  the limits' state keys (m in [1, 16]): each the caller's
--             key plus its algorithm's suffix (":tb", ":gcra", ...), so a
--             limit's state is the one its algorithm's own Limiter keeps;
--             all distinct, all in one Redis Cluster slot
-- ARGV[1]     cost, integer in [0, 1e12]; 0 peeks
-- ARGV[2..]   per limit, three numbers: rate, period_us (as prelude.lua),
--             and burst x 8 + algorithm, burst in [1, 1e12] and algorithm
--             the 1-based index in multilimit.go's algorithms (the script
--             names those it takes at its ACCEPTED line); one argument
--             less per limit, to pass and to read, than four
-- ARGV[2+3m]  optional now_us; absent or "" reads the server clock (TIME)
--
-- The numbers packed into one argument (sluice.Script.Args: 7 bytes
-- each, in this order), or one per argument, each in decimal or as 0x
-- and hex digits (ext/algorithm read_args.lua). Every argument is checked here,
-- before any key is read or written. Keep in step with model.go.

-- now is the server's clock (TIME), not one passed in; the state text
-- reads it (ext/algorithm state_text.lua).
local server_clock = false

-- ACCEPTED: local accepted = {[id] = true, ...}

-- The checks are written out, as in prelude.lua: a Lua function call
-- costs about 1,600 instructions.
-- READ_ARGS
local cost = args[1]
if not (cost and cost >= 0 and cost <= 1e12 and cost % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_COST cost must be an integer')
end
local m = #KEYS
if m < 1 or m > 16 then
  return redis.error_reply('SLUICE_INVALID_KEY 1 to 16 keys expected, one per limit')
end
if nargs ~= 1 + 3 * m and nargs ~= 2 + 3 * m then
  return redis.error_reply('SLUICE_INVALID_LIMIT 3 arguments per limit expected')
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

-- limits: per limit i, its algorithm, rate, period_us and burst, at
-- 4 x (i - 1) + 1 to 4: made at its size, 4m (unpack past the end of
-- args gives nils; a table that grows is copied at each power of two).
local limits = {unpack(args, 2, 1 + 4 * m)}
for i = 1, m do
  local a = 3 * i - 1
  local rate, period_us, burst = args[a], args[a + 1], args[a + 2]
  local id = burst and burst % 8
  if id then
    burst = (burst - id) / 8
  end
  if not (accepted[id]
      and period_us and period_us >= 1000 and period_us <= 31622400000000 and period_us % 1 == 0
      and rate and rate >= 1 and rate <= period_us and rate <= 1e12 and rate % 1 == 0
      and burst and burst >= 1 and burst <= 1e12 and burst % 1 == 0) then
    return redis.error_reply('SLUICE_INVALID_LIMIT rate, period_us, burst and algorithm must be integers in range')
  end
  local b = 4 * i - 4
  limits[b + 1], limits[b + 2], limits[b + 3], limits[b + 4] = id, rate, period_us, burst
-- DEFINE: what the script does with each limit's algorithm once it is checked
end

local now = args[2 + 3 * m]
if nargs == 1 + 3 * m or ARGV[nargs] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2] -- strings of digits, converted by the arithmetic
  server_clock = true
elseif not (now and now >= 0 and now <= MAX_NOW_US and now % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
end

-- Sluice script prelude, prepended to every algorithm's decision script.
-- It parses and validates the arguments all of them share, before any
-- write, and leaves them in locals for the body:
--
-- KEYS[1]  the state key (non-empty); the body may derive further keys
--          from it, which share its hash tag
-- ARGV[1]  rate       events per period, integer in [1, min(period_us, 1e12)]
-- ARGV[2]  period_us  period in microseconds, integer in [1000, 31622400000000]
-- ARGV[3]  burst      integer in [1, 1e12]
-- ARGV[4]  cost       integer in [-1e12, 1e12]: > 0 consumes, 0 peeks, < 0 refunds
-- ARGV[5]  now_us     optional, Unix microseconds in [0, 4102444800000000]
--                     (2100-01-01); absent or "" reads the server clock (TIME)
--
-- Or all of them in one argument (sluice.NewPackedScript, Script.Args,
-- which Sluice's stores send): ARGV[1] of 28 or 35 bytes, the four
-- numbers, or five with now_us, each 7 bytes, big-endian two's
-- complement. One argument per number: each in decimal or, when it
-- starts with 0x, in hex (a negative number in decimal).
--
-- Errors: SLUICE_INVALID_KEY, SLUICE_INVALID_LIMIT, SLUICE_INVALID_COST.
-- Numbers are never turned into strings with tostring or '..' (14
-- significant digits); use string.format('%d', x). Keep in step with
-- algorithm.go (ParseArgs).

-- The checks are written out rather than through int_arg: a Lua function
-- call costs about 1,600 instructions, a C call (math.floor, math.min)
-- several hundred, where the operators below cost a few each. A number is
-- whole when v % 1 == 0; NaN and the infinities fail every range check.

local KEYS, ARGV, tonumber, redis, string = KEYS, ARGV, tonumber, redis, string -- globals read more than once, held in locals (a global is a table lookup at each read)
local key = KEYS[1]
if #KEYS ~= 1 or key == '' then
  return redis.error_reply('SLUICE_INVALID_KEY one non-empty key expected')
end
local nargs = #ARGV
local rate, period_us, burst, cost, now
if nargs == 1 then
  -- Packed: Redis's struct.unpack reads every number in one C call; with
  -- the arguments Redis no longer handles one by one, a decision costs
  -- about 4,000 instructions less than with a tonumber per argument (go
  -- run ./bench/cmd/sluice-instructions). A Lua without struct
  -- (gopher-lua, in miniredis) reads the bytes instead.
  local packed = ARGV[1]
  local size = #packed
  if size ~= 28 and size ~= 35 then
    return redis.error_reply('SLUICE_INVALID_LIMIT 4 or 5 numbers of 7 bytes expected')
  end
  local struct = rawget(_G, 'struct') -- nil in miniredis, which refuses to read a global it lacks
  if struct then
    if size == 28 then
      rate, period_us, burst, cost = struct.unpack('>i7i7i7i7', packed)
    else
      rate, period_us, burst, cost, now = struct.unpack('>i7i7i7i7i7', packed)
    end
  else
-- UNPACK7
    rate, period_us, burst, cost, now = v[1], v[2], v[3], v[4], v[5]
  end
elseif nargs == 4 or nargs == 5 then
  -- One per argument, from a store that does not pack (Sluice's pack
  -- every number within 2^53, Script.Args): tonumber reads each, decimal
  -- or 0x and hex digits alike, as read_args.lua does.
  rate, period_us, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  now = ARGV[5]
  if now == '' then
    now = nil
  elseif now then
    now = tonumber(now) or -1
  end
else
  return redis.error_reply('SLUICE_INVALID_LIMIT 4 or 5 arguments expected')
end
if not (period_us and period_us >= 1000 and period_us <= 31622400000000 and period_us % 1 == 0
    and rate and rate >= 1 and rate <= period_us and rate <= 1e12 and rate % 1 == 0
    and burst and burst >= 1 and burst <= 1e12 and burst % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_LIMIT rate, period_us and burst must be integers in range')
end
if not (cost and cost >= -1e12 and cost <= 1e12 and cost % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_COST cost must be an integer')
end
local server_clock = now == nil -- now is the server's clock (TIME), not one passed in
if server_clock then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2] -- strings of digits, converted by the arithmetic
elseif not (now >= 0 and now <= MAX_NOW_US and now % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
end

-- dry: when true, the body decides a cost > 0 without consuming (no write,
-- state reported as it is). A decision script always runs with false;
-- the multi-limit script (multilimit.lua) wraps each body in a function
-- and runs it dry first, so that it consumes only when every limit allows.
local dry = false

-- End of prelude.

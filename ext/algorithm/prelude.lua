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
-- Errors: SLUICE_INVALID_KEY, SLUICE_INVALID_LIMIT, SLUICE_INVALID_COST.
-- Numbers are never turned into strings with tostring or '..' (14
-- significant digits); use string.format('%d', x). Keep in step with
-- algorithm.go (ParseArgs).

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
local cost = int_arg(4, -1e12, 1e12)
if cost == nil then
  return redis.error_reply('SLUICE_INVALID_COST cost must be an integer')
end
local now
if ARGV[5] == nil or ARGV[5] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = int_arg(5, 0, MAX_NOW_US)
end
if now == nil then
  return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
end

-- dry: when true, the body decides a cost > 0 without consuming (no write,
-- state reported as it is). A decision script always runs with false;
-- the multi-limit script (multilimit.lua) wraps each body in a function
-- and runs it dry first, so that it consumes only when every limit allows.
local dry = false

-- End of prelude.

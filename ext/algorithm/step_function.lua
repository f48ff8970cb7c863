-- Sluice step function (StepFunction): an algorithm's steps (Spec.Steps)
-- as one Lua function expression, from the line "function(" on, for a
-- script that decides several limits in two passes (multilimit.lua):
--
--   f(key, raw, rate, period_us, burst, cost, now, dry)
--     -> fail, allowed, remaining, retry_after, reset_after, raw
--
-- rate, period_us, burst, cost (0 to 1e12) and now as the prelude leaves
-- them, checked. Dry, it runs the limit's check, reads key (GET, which
-- raises WRONGTYPE for another type, as the decision script does) and
-- decides without consuming or writing; raw is then ignored and the
-- string read is returned as raw. Not dry, it decides on raw, what a dry
-- call returned (nothing having written key since), and writes as the
-- decision script does (state_text.lua). fail is the message of a check
-- that failed (the limit's, or the state's), before anything is written;
-- the figures are then nil. Multiple returns, not a table: a table costs
-- about 1,100 instructions. It reads MAX_NOW_US and MAX_FILL_US (lib.lua)
-- and server_clock, true when now is the server's clock.
function(key, raw, rate, period_us, burst, cost, now, dry)
local fail, allowed, remaining, retry_after, reset_after, write, expiry_us = nil, 1, 0, 0, 0, false, 0
local figures = true
local format, byte = string.format, string.byte
-- CHECK
if fail then
  return fail
end
if dry then
  raw = redis.call('GET', key)
end
local state, code, hex, keep_at = raw, -1, false, nil
if raw then
-- PARSE
end
-- STATE
if fail then
  return fail
end
if raw and not dry then
-- KEEP
end
-- STEP
if write and not dry then
  local wkey = key
-- WRITE
end
return nil, allowed, remaining, retry_after, reset_after, raw
end

-- Sluice decision body made of an algorithm's steps (Spec.Steps), after
-- the prelude: its check, one GET, the check of the state read, its
-- step, at most one write (state_text.lua).

local fail, allowed, remaining, retry_after, reset_after, write, expiry_us = nil, 1, 0, 0, 0, false, 0
local figures = true -- the step fills in every figure of the reply
local format, byte = string.format, string.byte
-- CHECK
if fail then
  return redis.error_reply(fail)
end
local raw = redis.call('GET', key)
local state, code, hex, keep_at = raw, -1, false, nil
if raw then
-- PARSE
end
-- STATE
if fail then
  return redis.error_reply(fail)
end
if raw then
-- KEEP
end
-- STEP
if write then
  local wkey = key
-- WRITE
end
return {allowed, remaining, retry_after, reset_after}

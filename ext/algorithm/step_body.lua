-- Sluice decision body made of an algorithm's steps (Spec.Steps), after
-- the prelude: its check, one GET, the check of the state read, its
-- step, at most one write (its TTL from its ttl part).

local fail, allowed, remaining, retry_after, reset_after, write, ttl_ms = nil, 1, 0, 0, 0, false, 0
local figures = true -- the step fills in every figure of the reply
-- CHECK
if fail then
  return redis.error_reply(fail)
end
local state = redis.call('GET', key)
if state then
  state = tonumber(state) or -1
end
-- STATE
if fail then
  return redis.error_reply(fail)
end
-- STEP
if write then
  -- string.format('%d') rather than the numbers themselves: redis.call
  -- turns a number into text with '%.17g', a floating-point conversion
  -- that costs more than an integer one.
  if state then
-- TTL
    redis.call('SET', key, string.format('%d', state), 'PX', string.format('%d', ttl_ms))
  else
    redis.call('DEL', key)
  end
end
return {allowed, remaining, retry_after, reset_after}

-- Sluice decision body made of an algorithm's steps (Spec.Steps), after
-- the prelude: its check, one GET, its step, at most one write.

local fail, allowed, remaining, retry_after, reset_after, write, ttl_ms = nil, 1, 0, 0, 0, false, 0
-- CHECK
if fail then
  return redis.error_reply(fail)
end
local state = redis.call('GET', key)
if state then
  state = tonumber(state) or -1
end
-- STEP
if fail then
  return redis.error_reply(fail)
end
if write then
  -- string.format('%d') rather than the numbers themselves: redis.call
  -- turns a number into text with '%.17g', a floating-point conversion
  -- that costs more than an integer one.
  if state then
    redis.call('SET', key, string.format('%d', state), 'PX', string.format('%d', ttl_ms))
  else
    redis.call('DEL', key)
  end
end
return {allowed, remaining, retry_after, reset_after}

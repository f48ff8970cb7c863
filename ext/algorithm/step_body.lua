-- Sluice decision made of an algorithm's steps (Spec.Steps), after the
-- prelude: its check, one GET, the check of the state read, its step, at
-- most one write (state_text.lua), and its reply, which differs with
-- where it runs (batch.go, stepTemplate):
--
-- * the decision script replies with one integer, (the state read - now,
--   or 0 when it is missing or not after now) x 2 + allowed. A Steps
--   algorithm decides on its state less now alone, a state at or before
--   now as a missing key, so the caller works out every figure on the Go
--   twin from that offset, and checks its allowed against this one: a
--   table of four integers would cost Redis about 5,500 instructions more
--   (go run ./bench/cmd/sluice-instructions). Keep in step with
--   algorithm.go (stepReply, Limiter.replaySingle).
-- * Spec.Body, which multilimit.lua runs as a function, replies with the
--   four figures, {allowed, remaining, retry_after, reset_after}.

local fail, allowed, remaining, retry_after, reset_after, write, expiry_us = nil, 1, 0, 0, 0, false, 0
-- FIGURES
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
-- OFFSET
if raw then
-- KEEP
end
-- STEP
if write then
  local wkey = key
-- WRITE
end
-- RETURN

-- Sluice atomic multi-limit of algorithms given as steps, after args.lua:
-- one pass, each key read once, written only when every limit allows.
--
-- Each limit's algorithm is decided by its steps (ext/algorithm
-- Spec.Steps), written out below for each algorithm it takes (the
-- DECIDE and WRITE lines, from step_decide.lua and step_write.lua) rather
-- than called: a Lua function call costs about 1,600 instructions. A step
-- decides whether a limit allows the cost the same way whether it
-- consumes or not (it only writes less), so one pass that consumes in
-- memory decides as multilimit.lua's dry pass does, and its states are
-- those of its second: they are written, once each, only if every limit
-- allowed and the cost is not 0. A check or a state that fails is an
-- error reply before anything is written, in the order of the limits.
--
-- Reply: per limit, (the state it read less now, or 0 when missing or
-- not after now) x 2 + its allowed bit. An algorithm given as steps
-- decides on its state less now alone, a state at or before now as a
-- missing key (ext/algorithm Spec.Steps), so the caller decides the
-- request again on the Go twins (model.go) from those offsets at an
-- instant of 0, which gives every figure, and checks each limit's
-- allowed against its bit. Keep in step with model.go.

local format, byte = string.format, string.byte
-- One MGET reads every key. It answers nil for a key of another type as
-- for a missing one, so a nil is read again with GET, which raises
-- WRONGTYPE for another type, as the algorithm's own script does.
local values = redis.call('MGET', unpack(KEYS))
local reply = {unpack(KEYS)} -- made at its size: a table that grows is copied at each power of two
local all = 1 -- every limit allows
for i = 1, m do
  local b = 4 * (i - 1)
  local id, rate, period_us, burst = limits[b + 1], limits[b + 2], limits[b + 3], limits[b + 4]
  local key, raw, dry, figures = KEYS[i], values[i], false, false
  local fail, allowed, remaining, retry_after, reset_after, write, expiry_us = nil, 1, 0, 0, 0, false, 0
  local state, code, keep_at
-- DECIDE: if id == 1 then (its step_decide.lua) elseif ... end
  local offset = 0
  if code > now then
    offset = code - now
  end
  reply[i] = offset * 2 + allowed
  -- The limit's figures are read: its slots hold what the write needs,
  -- the state after the pass, whether to write it and the instant its
  -- key expires at or after (KEEP); no table more to make.
  limits[b + 2], limits[b + 3], limits[b + 4] = state, write, keep_at
  if allowed == 0 then
    all = 0
  end
end
if all == 1 and cost > 0 then
  for b = 0, 4 * m - 4, 4 do
    if limits[b + 3] then
      local id, state, keep_at, wkey, expiry_us = limits[b + 1], limits[b + 2], limits[b + 4], KEYS[b / 4 + 1], 0
-- WRITE: if id == 1 then (its step_write.lua) elseif ... end
    end
  end
end
return reply

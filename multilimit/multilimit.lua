-- Sluice atomic multi-limit, two passes, after args.lua: for a call
-- whose limits are not all given as steps (multistep.lua decides those).
--
-- Each algorithm's decision code is inlined below as a function: an
-- algorithm given as steps as its step function (ext/algorithm
-- step_function.lua), which reads its key once for both passes, the
-- others as their body (the text after prelude.lua in their own script);
-- only the algorithms a call uses become functions (args.lua's DEFINE
-- line), as making one (a closure and its upvalues) costs.
-- Pass 1 runs every limit dry: each decides the cost against its state
-- and writes nothing. Only if every limit allows does pass 2 run them
-- again, for real; the script is atomic, now is fixed and every limit has
-- its own key, so pass 2 decides as pass 1 did.
--
-- Reply: {allowed (0|1), denied (1-based index of the first limit that
-- denied, 0 if none), then per limit: remaining, retry_after_us,
-- reset_after_us}, each as its algorithm's own script replies (dry when
-- the request was denied: remaining is then what is left, unconsumed).
-- Keep in step with model.go.

-- The reply, filled in as the limits are decided: limit i's figures at
-- 3i to 3i + 2.
local reply = {1, 0}
local raws = {} -- limit i's string read by its step function's dry pass
for i = 1, m do
  local b = 4 * (i - 1)
  local id = limits[b + 1]
  local fail, allowed, remaining, retry_after, reset_after
  if stepped[id] then
    fail, allowed, remaining, retry_after, reset_after, raws[i] =
      bodies[id](KEYS[i], false, limits[b + 2], limits[b + 3], limits[b + 4], cost, now, true)
    if fail then
      return redis.error_reply(fail)
    end
  else
    local r = bodies[id](KEYS[i], limits[b + 2], limits[b + 3], limits[b + 4], cost, now, true)
    if r.err then
      return r
    end
    allowed, remaining, retry_after, reset_after = r[1], r[2], r[3], r[4]
  end
  if allowed == 0 and reply[1] == 1 then
    reply[1], reply[2] = 0, i
  end
  reply[3 * i], reply[3 * i + 1], reply[3 * i + 2] = remaining, retry_after, reset_after
end
if reply[1] == 1 and cost > 0 then
  for i = 1, m do
    local b = 4 * (i - 1)
    local id = limits[b + 1]
    local fail, allowed, remaining, retry_after, reset_after
    if stepped[id] then
      fail, allowed, remaining, retry_after, reset_after =
        bodies[id](KEYS[i], raws[i], limits[b + 2], limits[b + 3], limits[b + 4], cost, now, false)
    else
      local r = bodies[id](KEYS[i], limits[b + 2], limits[b + 3], limits[b + 4], cost, now, false)
      fail, allowed, remaining, retry_after, reset_after = r.err, r[1], r[2], r[3], r[4]
    end
    if fail or allowed ~= 1 then
      -- Unreachable: pass 1 allowed this limit on the same state.
      return redis.error_reply('SLUICE_INTERNAL limit ' .. string.format('%d', i) .. ' decided differently on its second pass')
    end
    reply[3 * i], reply[3 * i + 1], reply[3 * i + 2] = remaining, retry_after, reset_after
  end
end
return reply

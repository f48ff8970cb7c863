-- Sluice batch of an algorithm's steps (Spec.Steps): many independent
-- decisions of one algorithm in one script, each as the algorithm's own
-- script would decide it, at one instant. Arguments and reply:
-- batch_args.lua, which runs first.
--
-- The state of a key is one integer. Each key is read once, with its first
-- request; every request on it is then decided on that value in memory by
-- the algorithm's check (once per run of requests of one shape) and
-- step, written out below rather than called (a Lua function call costs
-- about 1,600 instructions), and each key's
-- last write reaches Redis once, at the end. Decisions and the final state
-- are those of one script per request: the script runs alone, so nothing
-- else touches the keys meanwhile, and `now` is fixed. The first write of
-- the script is the one Redis may refuse for memory (OOM); it then fails
-- the call with nothing written.

local dry = false
local WRONG_TYPE = {} -- the state of a key holding another type
local kstate = {}     -- key index -> its state: an integer, false (no key), -1 (not a number) or WRONG_TYPE; nil: not read yet
local kttl = {}       -- key index -> the TTL of its pending write, in ms
local written = {}    -- key indexes with a pending write, in the order first written

-- Requests are taken in runs of one shape: the shape is read and the
-- check, which reads only the shape, runs once per run. Each request's
-- reference is decoded where it differs from the one before.
local last, k, sh -- the last reference read, and the key and shape it names
local i = 1
if implicit then
  k, sh = 1, 1
else
  local r = ARGV[refs + i]
  if r ~= last then
    local v = tonumber(r)
    sh = v % 256
    k = (v - sh) / 256 + 1
    sh = sh + 1
    last = r
  end
end
while i <= m do
  local run_shape = sh
  local rate, period_us, burst, cost, code = read_shape(sh)
  if code then
    -- Its requests fail with the code; the check still runs (its locals
    -- are the step's), on a limit that it accepts.
    rate, period_us, burst, cost = 1, 1000, 1, 0
  end
  local fail = nil
-- CHECK
  local run_fail = fail
  repeat
    local key = KEYS[k]
    if key == '' then
      n = n + 1
      reply[n] = -4
    elseif code then
      n = n + 1
      reply[n] = -code
    elseif run_fail then
      n = n + 1
      reply[n] = -error_code(run_fail)
    else
      local state = kstate[k]
      if state == nil then
        state = redis.pcall('GET', key)
        if type(state) == 'table' then
          state = WRONG_TYPE
        elseif state then
          state = tonumber(state) or -1
        end
        kstate[k] = state
      end
      if state == WRONG_TYPE then
        n = n + 1
        reply[n] = -5
      else
        local allowed, remaining, retry_after, reset_after, write, ttl_ms = 1, 0, 0, 0, false, 0
-- STEP
        if fail then
          n = n + 1
          reply[n] = -error_code(fail)
          fail = nil
        else
          if write then
            if kttl[k] == nil then
              written[#written + 1] = k
            end
            kstate[k], kttl[k] = state, ttl_ms
          end
          if retry_after ~= 0 then
            reply[n + 1], reply[n + 2], reply[n + 3] = remaining * 4 + 2 + allowed, reset_after, retry_after
            n = n + 3
          else
            reply[n + 1], reply[n + 2] = remaining * 4 + allowed, reset_after
            n = n + 2
          end
        end
      end
    end
    i = i + 1
    if implicit then
      if nkeys > 1 then
        k = i
      end
    elseif i <= m then
      local r = ARGV[refs + i]
      if r ~= last then
        local v = tonumber(r)
        sh = v % 256
        k = (v - sh) / 256 + 1
        sh = sh + 1
        last = r
      end
    end
  until i > m or sh ~= run_shape
end
for _, k in ipairs(written) do
  local state = kstate[k]
  if state then
    redis.call('SET', KEYS[k], string.format('%d', state), 'PX', string.format('%d', kttl[k]))
  else
    redis.call('DEL', KEYS[k])
  end
end
return reply

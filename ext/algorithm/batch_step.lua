-- Sluice batch of an algorithm's steps (Spec.Steps): many independent
-- decisions of one algorithm in one script, each as the algorithm's own
-- script would decide it, at one instant. Arguments: batch_args.lua,
-- which runs first.
--
-- The state of a key is one integer. Every key is read once, first; the
-- requests are then decided on those values in memory: the algorithm's
-- check once per run of requests of one shape, its step once per request,
-- written out below rather than called (a Lua function call costs about
-- 1,600 instructions), its TTL once per key written, and each key's last
-- write reaches Redis once, at the end. Decisions and the final state are
-- those of one script per request: the script runs alone, so nothing else
-- touches the keys meanwhile, and `now` is fixed. The first write of the
-- script is the one Redis may refuse for memory (OOM); it then fails the
-- call with nothing written.
--
-- Reply: {now_us, the state each key held (an integer in [0, 2^53], or
-- -1 no key, -2 anything else a string holds, -3 another type), then the
-- allowed bits, 50 to an integer: request i is bit (i - 1) % 50 of
-- integer floor((i - 1) / 50)}. The caller replays the requests on the Go
-- twin from those states at now_us, which gives every figure of every
-- decision, and checks its allowed bits against these. Keep in step with
-- batch.go (runStepBatch, replayBatch).

local dry = false
local figures = false -- the Go twin works out remaining and reset_after
local WRONG_TYPE = {} -- the state of a key holding another type, or a string its check refuses
local kstate = {}     -- key index -> its state: an integer, false (no key), -1 (not a number) or WRONG_TYPE
local kttl = {}       -- key index -> the TTL of its pending write, in ms
local written = {}    -- key indexes with a pending write, in the order first written

reply[1] = now
for j = 1, nkeys do
  local state = redis.pcall('GET', KEYS[j])
  local code = -1
  if type(state) == 'table' then
    state, code = WRONG_TYPE, -3
  elseif state then
    state = tonumber(state) or -1
    code = state
    if not (state >= 0 and state <= 9007199254740992 and state % 1 == 0) then
      code = -2
    end
    -- The algorithm's check of a stored state, once per key: a key that
    -- fails it fails every request on it, as one script per request would.
    local fail = nil
-- STATE
    if fail then
      state = WRONG_TYPE
    end
  end
  kstate[j] = state
  reply[j + 1] = code
end
n = nkeys + 1

local bits, bit = 0, 1 -- the allowed bits of the word being filled, and the next request's bit
local WORD = 1125899906842624 -- 2^50

-- Requests are taken in runs of one shape (the shape read and the check
-- run once), each cut into runs on one key (its state kept in a local).
-- Each request's reference is decoded where it differs from the one
-- before.
local last, k, sh -- the last reference read, and the key and shape it names
local i = 1
if implicit then
  k, sh = 1, 1
else
  local r = ARGV[refs + 1]
  local v = tonumber(r)
  sh = v % 256
  k = (v - sh) / 256 + 1
  sh = sh + 1
  last = r
end
while i <= m do
  local run_shape = sh
  -- The shape, checked as the prelude checks a decision's arguments
  -- (written out: batch.lua's read_shape, without a call).
  local b = 1 + 4 * (sh - 1)
  local rate, period_us, burst, cost = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
  local code
  if not (period_us and period_us >= 1000 and period_us <= 31622400000000 and period_us % 1 == 0
      and rate and rate >= 1 and rate <= period_us and rate <= 1e12 and rate % 1 == 0
      and burst and burst >= 1 and burst <= 1e12 and burst % 1 == 0) then
    code = 1
  elseif not (cost and cost >= -1e12 and cost <= 1e12 and cost % 1 == 0) then
    code = 2
  end
  if code then
    -- Its requests fail; the check still runs (its locals are the
    -- step's), on a limit that it accepts.
    rate, period_us, burst, cost = 1, 1000, 1, 0
  end
  local fail = nil
-- CHECK
  local dead_shape = code or fail
  fail = nil
  repeat
    local run_key = k
    local state = kstate[k]
    local dead = dead_shape or KEYS[k] == '' or state == WRONG_TYPE
    local wrote = false
    local allowed, remaining, retry_after, reset_after, write, ttl_ms
    if implicit and nkeys == 1 and not dead then
      -- One key and one shape: the whole batch is this loop, in words
      -- of 50 requests (bit starts at 1, as nothing came before).
      for first = 1, m, 50 do
        local last_of_word = first + 49
        if last_of_word > m then
          last_of_word = m
        end
        for _ = first, last_of_word do
          allowed, write = 1, false
-- STEP
          bits = bits + allowed * bit
          if write then
            wrote = true
          end
          bit = bit * 2
        end
        if bit == WORD then
          n = n + 1
          reply[n] = bits -- its own statement: gopher-lua (miniredis) assigns bits first
        bits, bit = 0, 1
        end
      end
      i = m + 1
    else
      repeat
        if not dead then
          allowed, write = 1, false
-- STEP
          bits = bits + allowed * bit
          if write then
            wrote = true
          end
        end
        bit = bit * 2
        if bit == WORD then
          n = n + 1
          reply[n] = bits -- its own statement: gopher-lua (miniredis) assigns bits first
        bits, bit = 0, 1
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
      until i > m or k ~= run_key or sh ~= run_shape
    end
    if wrote then
      kstate[run_key] = state
      if state then
-- TTL
        if kttl[run_key] == nil then
          written[#written + 1] = run_key
        end
        kttl[run_key] = ttl_ms
      else
        if kttl[run_key] == nil then
          written[#written + 1] = run_key
        end
        kttl[run_key] = false
      end
    end
  until i > m or sh ~= run_shape
end
if bit ~= 1 then
  n = n + 1
  reply[n] = bits
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

-- Sluice batch of an algorithm's steps (Spec.Steps): many independent
-- decisions of one algorithm in one script, each as the algorithm's own
-- script would decide it, at one instant. Arguments: batch_args.lua,
-- which runs first.
--
-- The state of a key is one integer. Every key is read once, first; the
-- requests are then decided on those values in memory: the algorithm's
-- check once per run of requests of one shape, its step once per request,
-- written out below rather than called (a Lua function call costs about
-- 1,600 instructions), and each key's last state reaches Redis once
-- (state_text.lua). Decisions and the final state are those of one
-- script per request: the script runs alone, so nothing else touches the
-- keys meanwhile, and `now` is fixed. Every read comes before the first
-- write, the one Redis may refuse for memory (OOM): it then fails the
-- call with nothing written.
--
-- Reply: {now_us, the state each key held (an integer in [0, 2^53], or
-- -1 no key, -2 anything else a string holds, -3 another type), then the
-- allowed bits, 50 to an integer: request i is bit (i - 1) % 50 of
-- integer floor((i - 1) / 50)}. The caller replays the requests on the Go
-- twin from those states at now_us, which gives every figure of every
-- decision, and checks its allowed bits against these. Keep in step with
-- batch.go (runStepBatch, replayBatch).

-- The functions read per key, as locals (batch_args.lua holds the
-- globals): a table field is a lookup at each read.
local format, byte = string.format, string.byte
local dry = false
local figures = false -- the Go twin works out remaining and reset_after
local WRONG_TYPE = {} -- the state of a key holding another type, or a string its check refuses
local WORD = 1125899906842624 -- 2^50
local bits, bit = 0, 1 -- the allowed bits of the word being filled, and the next request's bit
reply[1] = now
n = nkeys + 1 -- the allowed bits follow each key's state

-- shape returns shape sh's rate, period_us, burst and cost, checked as
-- the prelude checks a decision's arguments, and the code of its failure
-- (then a limit the algorithm's check accepts, so that it still runs:
-- its locals are the step's). Called once per run of requests of one
-- shape.
local function shape(sh)
  local b = 1 + 4 * (sh - 1)
  local rate, period_us, burst, cost = args[b + 1], args[b + 2], args[b + 3], args[b + 4]
  if not (period_us and period_us >= 1000 and period_us <= 31622400000000 and period_us % 1 == 0
      and rate and rate >= 1 and rate <= period_us and rate <= 1e12 and rate % 1 == 0
      and burst and burst >= 1 and burst <= 1e12 and burst % 1 == 0) then
    return 1, 1000, 1, 0, 1
  elseif not (cost and cost >= -1e12 and cost <= 1e12 and cost % 1 == 0) then
    return 1, 1000, 1, 0, 2
  end
  return rate, period_us, burst, cost, nil
end

-- Several keys: one MGET, which answers nil for a key of another type as
-- for a missing one. One EXISTS of every nil tells them apart; only when
-- it counts a key are the nils asked one by one (EXISTS, in other). One
-- key: GET, whose WRONGTYPE error pcall returns as a table.
local values = nkeys > 1 and redis.call('MGET', unpack(KEYS))
local other = false -- some key MGET answered nil for holds another type
if values then
  local missing, nmissing = nil, 0
  for j = 1, nkeys do
    if not values[j] then
      nmissing = nmissing + 1
      missing = missing or {}
      missing[nmissing] = KEYS[j]
    end
  end
  other = nmissing > 0 and redis.call('EXISTS', unpack(missing, 1, nmissing)) > 0
end

if implicit and nkeys > 1 then
  -- A key each, one shape (what coalescing makes of traffic on many
  -- keys): one MGET, then one pass that checks each key's state, decides
  -- its request and writes it or defers its write to one MSET (the keys
  -- are distinct, and every read is in the MGET).
  local rate, period_us, burst, cost, dead_shape = shape(1)
  local fail = nil
-- CHECK
  dead_shape = dead_shape or fail
  reply = {now, unpack(values)} -- made at its size: a table that grows is copied at each power of two
  local sets, nsets, ats, last_at, last_text, last_state, last_state_text = {}, 0, {}, nil, nil, nil, nil -- DEFER's
  for j = 1, m do
    local raw = values[j]
    local state, code, hex, keep_at, expiry_us = raw, -1, false, nil, 0
    local dead = dead_shape
    if raw then
-- PARSE
      fail = nil
-- STATE
      if fail then
        dead = true
      else
-- KEEP
      end
    elseif other and redis.call('EXISTS', KEYS[j]) == 1 then
      code, dead = -3, true
    end
    reply[j + 1] = code
    if not dead and KEYS[j] ~= '' then
      local allowed, remaining, retry_after, reset_after, write = 1, 0, 0, 0, false
-- STEP
      bits = bits + allowed * bit
      if write then
        local wkey = KEYS[j]
-- DEFER
      end
    end
    bit = bit * 2
    if bit == WORD then
      n = n + 1
      reply[n] = bits -- its own statement: gopher-lua (miniredis) assigns bits first
      bits, bit = 0, 1
    end
  end
  if bit ~= 1 then
    n = n + 1
    reply[n] = bits
  end
-- FLUSH
  return reply
end

local kstate = {} -- key index -> its state: an integer, false (no key), -1 (not a number) or WRONG_TYPE
local kkeep = {}  -- key index -> the instant its key expires at or after (state_text.lua KEEP), or nil
local written, kwritten = {}, {} -- key indexes with a pending write, in the order first written, and as a set

for j = 1, nkeys do
  local raw
  if values then
    raw = values[j]
    if not raw and other and redis.call('EXISTS', KEYS[j]) == 1 then
      raw = WRONG_TYPE
    end
  else
    raw = redis.pcall('GET', KEYS[j])
  end
  local state, code, hex, keep_at, expiry_us = raw, -1, false, nil, 0
  if type(raw) == 'table' then
    state, code = WRONG_TYPE, -3
  elseif raw then
-- PARSE
    -- The algorithm's check of a stored state, once per key: a key that
    -- fails it fails every request on it, as one script per request would.
    local fail = nil
-- STATE
    if fail then
      state = WRONG_TYPE
    else
-- KEEP
    end
  end
  kstate[j], kkeep[j] = state, keep_at
  reply[j + 1] = code
end
-- Requests are taken in runs of one shape (the shape read and the check
-- run once), each cut into runs on one key (its state kept in a local).
-- Each request's reference is decoded where it differs from the one
-- before.
local last, k, sh -- the last reference read, and the key and shape it names
local i = 1
if implicit then
  k, sh = 1, 1
else
  local v = args[refs + 1]
  sh = v % 256
  k = (v - sh) / 256 + 1
  sh = sh + 1
  last = v
end
while i <= m do
  local run_shape = sh
  local rate, period_us, burst, cost, dead_shape = shape(sh)
  local fail = nil
-- CHECK
  dead_shape = dead_shape or fail
  fail = nil
  repeat
    local run_key = k
    local state = kstate[k]
    local dead = dead_shape or KEYS[k] == '' or state == WRONG_TYPE
    local wrote = false
    local allowed, remaining, retry_after, reset_after, write
    if implicit and not dead then
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
        if not implicit and i <= m then
          local v = args[refs + i]
          if v ~= last then
            sh = v % 256
            k = (v - sh) / 256 + 1
            sh = sh + 1
            last = v
          end
        end
      until i > m or k ~= run_key or sh ~= run_shape
    end
    if wrote then
      if not kwritten[run_key] then
        kwritten[run_key] = true
        written[#written + 1] = run_key
      end
      kstate[run_key] = state
    end
  until i > m or sh ~= run_shape
end
if bit ~= 1 then
  n = n + 1
  reply[n] = bits
end
local sets, nsets, ats, last_at, last_text, last_state, last_state_text = {}, 0, {}, nil, nil, nil, nil -- DEFER's
for _, k in ipairs(written) do
  local state, keep_at, expiry_us, wkey = kstate[k], kkeep[k], 0, KEYS[k]
-- DEFER
end
-- FLUSH
return reply

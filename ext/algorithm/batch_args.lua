-- Sluice batch arguments, read by both batch scripts (batch.lua for an
-- algorithm's body, batch_step.lua for its step) before anything else:
--
-- KEYS[1..k]   the distinct state keys, 1 <= k <= m (on Redis Cluster, all
--              in one slot)
-- ARGV[1]      m x 512 + s: m the requests, integer in [1, 256], and s
--              the distinct shapes, in [1, m]; a shape is a request's rate,
--              period_us, burst and cost (one number: one parse)
-- ARGV[2..1+4s]        the shapes, four integers each, as prelude.lua's
--                      ARGV[1..4]
-- ARGV[2+4s..1+4s+m]   per request, in order: (key index - 1) x 256 +
--                      (shape index - 1); left out when there is one shape
--                      and one key, or one key per request (request i then
--                      names key i), and only then
-- ARGV[2+4s+m]         optional now_us (ARGV[2+4s] when the references are
--                      left out); absent or "" reads the server clock
--
-- Limits, costs and keys are sent once however many requests share them,
-- and a request costs one argument: parsing is per distinct value, not per
-- request. A shape out of range fails its requests only (codes below);
-- anything else here fails the call before anything is decided.
--
-- Reply, per request in order: -code when it was rejected before anything
-- was written for it, else head = remaining x 4 + 2 x (retry_after_us ~=
-- 0) + allowed, then reset_after_us, then retry_after_us when head says
-- so. Codes: 1 SLUICE_INVALID_LIMIT, 2 SLUICE_INVALID_COST, 3
-- SLUICE_COST_EXCEEDS_BURST, 4 SLUICE_INVALID_KEY, 5 SLUICE_INVALID_STATE
-- or WRONGTYPE, 6 anything else, 7 OOM (Redis over maxmemory refused the
-- request's first write). Keep in step with batch.go.

-- The numbers, packed or one per argument, read into args (read_args.lua):
-- READ_ARGS
local m = args[1]
local s = 0
if m and m >= 0 and m % 1 == 0 then
  s = m % 512
  m = (m - s) / 512
end
if not (m and m >= 1 and m <= 256 and m % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_LIMIT a batch holds 1 to 256 requests')
end
if not (s >= 1 and s <= m) then
  return redis.error_reply('SLUICE_INVALID_LIMIT a batch holds 1 to m shapes')
end
local nkeys = #KEYS
if nkeys < 1 or nkeys > m then
  return redis.error_reply('SLUICE_INVALID_KEY a batch names 1 to m keys')
end
if nkeys > 1 then
  local seen = {}
  for j = 1, nkeys do
    local key = KEYS[j]
    if seen[key] then
      return redis.error_reply('SLUICE_INVALID_KEY a batch names each key once')
    end
    seen[key] = true
  end
end
local refs = 1 + 4 * s
local implicit = s == 1 and (nkeys == 1 or nkeys == m) -- the references are left out
local nrefs = m
if implicit then
  nrefs = 0
end
if nargs ~= refs + nrefs and nargs ~= refs + nrefs + 1 then
  return redis.error_reply('SLUICE_INVALID_LIMIT 1 + 4 x shapes + requests arguments expected')
end
local now = args[refs + nrefs + 1]
local server_clock = nargs == refs + nrefs or ARGV[nargs] == '' -- now is the server's clock (TIME), not one passed in
if server_clock then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2] -- strings of digits, converted by the arithmetic
elseif not (now and now >= 0 and now <= MAX_NOW_US and now % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
end

-- Every request's reference, checked before anything is decided; the
-- scripts decode them again as they go (where one differs from the one
-- before: tables per request would cost more).
if not implicit then
  local last
  for i = 1, m do
    local v = args[refs + i]
    if v ~= last then
      if not (v and v >= 0 and v < 256 * nkeys and v % 1 == 0 and v % 256 < s) then
        return redis.error_reply('SLUICE_INVALID_KEY a request names no key or shape')
      end
      last = v
    end
  end
end

local reply, n = {}, 0

-- End of batch arguments.

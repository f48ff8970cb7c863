-- A scratch variant of the fixed window's body (algorithms/fixedwindow/
-- fixedwindow.lua), not shipped, measured after Sluice's prelude:
--   go run ./bench/cmd/sluice-instructions -body bench/runs/scratch/fixedwindow-pttl.lua -args 1000000,1000000,1000000,1
-- (bench/runs/instructions.md). It keeps the key's expiry within a window
-- (fixed-width text, SETRANGE of the count while PTTL shows the key
-- outlives the window) and replies with one integer where it can.
local compact = true

-- Sluice fixed window, after the shared prelude
-- (ext/algorithm/prelude.lua), which has parsed and validated key,
-- rate, period_us, burst, cost and now.
--
-- Windows of period_us microseconds are aligned to the Unix epoch; window
-- idx covers [idx x period_us, (idx + 1) x period_us). Each allows `rate`
-- cost units; burst is not used.
--
-- State: KEYS[1] holds the string "start:count", start being the Unix
-- microsecond at which the count's window began (put on this period's grid
-- first, in case a different period wrote it), written as 16 and 13
-- digits, zero-padded, so that a write in the window the key holds can
-- send only the count (SETRANGE) and keep the key's expiry while that
-- outlasts the window (PTTL); an earlier version's unpadded text is read
-- alike. A missing key or an earlier window means a count of 0. If the
-- stored window is later than now's (the clock went back), it is kept:
-- the limit looks tighter, never looser.
--
-- Cost > 0 consumes, 0 peeks (would a cost-1 request be allowed?), < 0
-- refunds |cost| in the stored window (never below 0).
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}; a
-- denied request is allowed at the next window, so retry_after is the time
-- until the window ends. The decision script (compact, prelude.lua)
-- replies with one integer instead when it can (ext/algorithm
-- Spec.CompactReply): (reset_after_us x (rate + 1) + remaining) x 2 +
-- allowed, whenever that is below 2^53; a denial's retry_after is its
-- reset_after.
-- Writes: on admission and refund only (a denial and a peek write
-- nothing): SETRANGE of the count in the window the key holds while its
-- expiry outlasts the window, else SET PX until the window ends, plus
-- 1 s. O(1): TIME, GET, at most a PTTL and one SETRANGE, SET or DEL.
-- Keep in step with model.go.

local TTL_MARGIN_MS = 1000

if cost > rate then
  return redis.error_reply('SLUICE_COST_EXCEEDS_BURST cost exceeds the rate a window allows, so it can never be allowed')
end
if cost < -rate then
  return redis.error_reply('SLUICE_INVALID_COST a refund cannot exceed the rate')
end

-- Arithmetic is written out (x % y, comparisons) rather than through
-- math.floor, math.ceil and math.max: each C call costs several hundred
-- instructions, an operator a few. now and w are whole and not negative,
-- so x - x % p is floor(x / p) * p exactly.
local window = now - now % period_us -- its start
local count = 0
local same = false -- the key holds this window's count in this version's text
local stored = redis.call('GET', key)
if stored then
  local w, c
  local fixed = #stored == 30 and string.byte(stored, 17) == 58
  if fixed then
    w, c = tonumber(string.sub(stored, 1, 16)), tonumber(string.sub(stored, 18))
  else
    w, c = string.match(stored, '^(%d+):(%d+)$')
    w, c = tonumber(w), tonumber(c)
  end
  if not (w and c and w >= 0 and w <= MAX_NOW_US and w % 1 == 0
      and c >= 0 and c <= 1e12 and c % 1 == 0) then
    return redis.error_reply('SLUICE_INVALID_STATE key does not hold a fixed window')
  end
  if w == window then
    same, count = fixed, c
  else
    w = w - w % period_us -- on this period's grid
    if w >= window then
      window, count = w, c
    end
  end
end
local window_end = window + period_us

local allowed = 1
local retry_after = 0
local write = false
local need = 1
if cost > 1 then
  need = cost
end
if cost < 0 then
  if count > 0 then
    count = count + cost
    if count < 0 then
      count = 0
    end
    write = true
  end
elseif count + need > rate then
  allowed = 0
  retry_after = window_end - now
elseif cost > 0 and not dry then
  count = count + cost
  write = true
end

if write then
  local left = window_end - now
  if count > 0 and same and redis.call('PTTL', key) * 1000 >= left then
    redis.call('SETRANGE', key, '17', string.format('%013d', count))
  elseif count > 0 then
    local ttl_ms = (left - left % 1000) / 1000 + TTL_MARGIN_MS
    if left % 1000 ~= 0 then
      ttl_ms = ttl_ms + 1 -- ceil(left / 1000) + TTL_MARGIN_MS
    end
    redis.call('SET', key, string.format('%016d:%013d', window, count), 'PX', string.format('%d', ttl_ms))
  else
    redis.call('DEL', key)
  end
end

local reset_after = 0
if count > 0 then
  reset_after = window_end - now
end
local remaining = rate - count
if remaining < 0 then
  remaining = 0
end
if compact then
  local u = reset_after * (rate + 1) + remaining
  if u < 4503599627370496 then -- 2^52
    return u * 2 + allowed
  end
end
return {allowed, remaining, retry_after, reset_after}

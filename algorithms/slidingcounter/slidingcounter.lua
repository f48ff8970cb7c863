-- Sluice sliding window counter, after the shared prelude
-- (ext/algorithm/prelude.lua), which has parsed and validated key,
-- rate, period_us, burst, cost and now.
--
-- Windows of period_us are aligned to the Unix epoch. The estimate of what
-- was used in the last period_us is
--
--   estimate = prev x (period_us - elapsed) / period_us + cur
--
-- where cur and prev are the counts of the current and previous windows and
-- elapsed the time since the current window began. A request of cost n is
-- allowed when estimate + n <= rate (burst is not used). The estimate is a
-- Lua number (double); every operation is the same IEEE-754 operation in
-- the same order in model.go, so both agree exactly.
--
-- State: KEYS[1] holds the string "start:cur:prev", start being the Unix
-- microsecond at which the current window began (put on this period's grid
-- first, in case a different period wrote it). If the stored window is
-- later than now's (the clock went back), the script decides as at its
-- start: the limit looks tighter, never looser.
--
-- Cost > 0 consumes, 0 peeks (would a cost-1 request be allowed?), < 0
-- refunds |cost| from the current window's count (never below 0).
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us};
-- retry_after is the earliest time the same request is allowed if nothing
-- else is counted meanwhile.
-- Writes: SET PX (until the next window ends, plus 1 s) on admission and
-- refund only; a denial and a peek write nothing. O(1). Keep in step with
-- model.go.

local TTL_MARGIN_MS = 1000

if cost > rate then
  return redis.error_reply('SLUICE_COST_EXCEEDS_BURST cost exceeds the rate a window allows, so it can never be allowed')
end
if cost < -rate then
  return redis.error_reply('SLUICE_INVALID_COST a refund cannot exceed the rate')
end

local window = math.floor(now / period_us) * period_us -- its start
local at = now -- the time the decision is made for
local cur, prev = 0, 0
local stored = redis.call('GET', key)
if stored then
  local w, c, p = string.match(stored, '^(%d+):(%d+):(%d+)$')
  w, c, p = tonumber(w), tonumber(c), tonumber(p)
  if w == nil or c == nil or p == nil or w > MAX_NOW_US or c > 1e12 or p > 1e12 then
    return redis.error_reply('SLUICE_INVALID_STATE key does not hold a sliding window counter')
  end
  w = math.floor(w / period_us) * period_us -- on this period's grid
  if w > window then
    window, at = w, w
    cur, prev = c, p
  elseif w == window then
    cur, prev = c, p
  elseif w == window - period_us then
    prev = c
  end
end
local elapsed = at - window

-- fits reports whether n more are allowed e microseconds into a window
-- whose own count is c and whose previous window's count is p.
local function fits(p, c, e, n)
  return p * (period_us - e) / period_us + c + n <= rate
end

local need = math.max(cost, 1)
local allowed = 1
local retry_after = 0
local write = false
if cost < 0 then
  if cur > 0 then
    cur = math.max(cur + cost, 0)
    write = true
  end
elseif not fits(prev, cur, elapsed, need) then
  allowed = 0
  -- Later in this window, once the previous window weighs less; the
  -- closed form is only a starting point, fits() has the last word.
  if cur + need <= rate then
    local e = math.ceil(period_us - (rate - cur - need) * period_us / prev)
    e = math.min(math.max(e, elapsed + 1), period_us)
    while e < period_us and not fits(prev, cur, e, need) do
      e = e + 1
    end
    if e < period_us then
      retry_after = at - now + e - elapsed
    end
  end
  -- Else in the next window, where this window's count becomes the
  -- previous one (at its very end, both counts are gone).
  if retry_after == 0 then
    local e = 0
    if cur > 0 then
      e = math.min(math.max(math.ceil(period_us - (rate - need) * period_us / cur), 0), period_us)
    end
    while e < period_us and not fits(cur, 0, e, need) do
      e = e + 1
    end
    retry_after = at - now + period_us - elapsed + e
  end
elseif cost > 0 and not dry then
  cur = cur + cost
  write = true
end

if write then
  if cur > 0 or prev > 0 then
    redis.call('SET', key, string.format('%d:%d:%d', window, cur, prev),
      'PX', string.format('%d', math.ceil((window + 2 * period_us - now) / 1000) + TTL_MARGIN_MS))
  else
    redis.call('DEL', key)
  end
end

local remaining = math.max(math.floor(rate - (prev * (period_us - elapsed) / period_us + cur)), 0)
while remaining > 0 and not fits(prev, cur, elapsed, remaining) do
  remaining = remaining - 1
end
local reset_after = 0
if cur > 0 then
  reset_after = window + 2 * period_us - now
elseif prev > 0 then
  reset_after = window + period_us - now
end
return {allowed, remaining, retry_after, reset_after}

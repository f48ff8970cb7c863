-- Sluice token bucket, after the shared prelude
-- (ext/algorithm/prelude.lua), which has parsed and validated key,
-- rate, period_us, burst, cost and now.
--
-- The bucket holds up to `burst` tokens and refills one token every
-- `interval` = ceil(period_us / rate) microseconds. Its whole state is one
-- integer, the time at which it will be full again ("tat", Unix
-- microseconds); tat - now is its deficit and a missing key is a full
-- bucket. All arithmetic is on integers below 2^53, exact in a Lua number,
-- so the Go model (model.go) computes the very same values.
--
-- Cost > 0 takes tokens, 0 peeks (would a cost-1 request be allowed?),
-- < 0 gives |cost| tokens back (never past full).
-- Reply: {allowed (0|1), remaining (tokens), retry_after_us, reset_after_us}.
-- A write leaves the key expiring 1 to 2 s after the bucket is full, or
-- up to 33 s for a key whose state a write moved past its expiry
-- (ext/algorithm state_text.lua); a peek and a denial write nothing.
-- O(1): TIME, GET, at most one write.
-- Extra errors, before any write: SLUICE_INVALID_LIMIT (interval not within
-- 1%, fill time too long), SLUICE_COST_EXCEEDS_BURST, SLUICE_INVALID_COST,
-- SLUICE_INVALID_STATE.
--
-- Written as steps (ext/algorithm Spec.Steps): the check, on the limit and
-- the cost alone; after "-- state" the check of `state`, the stored tat
-- (false: no key; -1: not a number); after "-- step" the decision on a
-- state that passed, which fills in remaining and reset_after only when
-- figures is set; after "-- expiry" the instant from which a state
-- decides as a missing key.
-- The decision script and the batch are built around them.

-- Arithmetic is written out (x % y, comparisons) rather than through
-- math.ceil, math.floor and math.max: each C call costs several hundred
-- instructions, an operator a few, and the results are the same integers.
local interval = (period_us - period_us % rate) / rate
if interval * rate < period_us then
  interval = interval + 1 -- ceil(period_us / rate)
end
if (interval * rate - period_us) * 100 > period_us then
  fail = 'SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds'
elseif interval > MAX_FILL_US / burst then
  fail = 'SLUICE_INVALID_LIMIT burst x period / rate is too long'
elseif cost > burst then
  fail = 'SLUICE_COST_EXCEEDS_BURST cost exceeds burst, so it can never be allowed'
elseif cost < -burst then
  fail = 'SLUICE_INVALID_COST a refund cannot exceed burst'
end
local tolerance = burst * interval -- microseconds to refill an empty bucket
local need = interval -- what the request takes: a peek asks about one token
if cost > 1 then
  need = cost * interval
end
local refund = cost * interval
local consumes = cost > 0 and not dry
local most = tolerance - need -- the largest deficit at which the request is allowed
-- state
if state and not (state >= 0 and state <= MAX_NOW_US + MAX_FILL_US and state % 1 == 0) then
  fail = 'SLUICE_INVALID_STATE key does not hold a token bucket'
end
-- step
do
  local deficit = 0
  if state and state > now then
    deficit = state - now
  end
  if cost < 0 then
    deficit = deficit + refund
    if deficit < 0 then
      deficit = 0
    end
    write = true
  elseif deficit > most then
    allowed = 0
    retry_after = deficit - most
  elseif consumes then
    deficit = deficit + need
    write = true
  end
  if write then
    state = deficit > 0 and now + deficit -- false: a full bucket, no key
  end
  if figures then
    if deficit < tolerance then
      local room = tolerance - deficit
      remaining = (room - room % interval) / interval
    end
    reset_after = deficit
  end
end
-- expiry
expiry_us = state -- the state is the instant the bucket is full again

-- Sluice GCRA (generic cell rate algorithm), after the shared prelude
-- (ext/algorithm/prelude.lua), which has parsed and validated key,
-- rate, period_us, burst, cost and now.
--
-- State: KEYS[1] holds one integer, the theoretical arrival time ("tat",
-- Unix microseconds) of the next request at the regular rate; a missing
-- key means tat <= now. The emission interval is T = ceil(period_us /
-- rate) microseconds and the tolerance is burst x T: a request of cost n
-- conforms when tat + n x T - now <= burst x T.
--
-- Cost > 0 takes n emission intervals, cost 0 peeks (would a cost-1 request
-- conform?), cost < 0 refunds |cost| intervals (never below now).
-- Reply: {allowed (0|1), remaining, retry_after_us, reset_after_us}.
-- Writes on admission and refund only, the key expiring 1 to 2 s after
-- tat, or up to 33 s for a key whose state a write moved past its
-- expiry (ext/algorithm state_text.lua); a denial and a peek write nothing.
-- O(1): TIME, GET, at most one write.
-- Keep in step with model.go.
--
-- Written as steps (ext/algorithm Spec.Steps): the check, on the limit and
-- the cost alone; after "-- state" the check of `state`, the stored tat
-- (false: no key; -1: not a number); after "-- step" the decision on a
-- state that passed, which fills in remaining and reset_after only when
-- figures is set; after "-- expiry" the instant from which a state
-- decides as a missing key.
-- The decision script and the batch are built around them.

-- Arithmetic is written out (x % y, comparisons) rather than through
-- math.ceil, math.floor and math.max, as in the token bucket: each C call
-- costs several hundred instructions, an operator a few.
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
local tolerance = burst * interval
local need = interval -- what the request takes: a peek asks about one interval
if cost > 1 then
  need = cost * interval
end
local refund = cost * interval
local consumes = cost > 0 and not dry
local horizon = now + tolerance - need -- the latest tat at which the request conforms
-- state
if state and not (state >= 0 and state <= MAX_NOW_US + MAX_FILL_US and state % 1 == 0) then
  fail = 'SLUICE_INVALID_STATE key does not hold a GCRA state'
end
-- step
do
  local tat = now
  if state and state > now then
    tat = state
  end
  if cost < 0 then
    tat = tat + refund
    if tat < now then
      tat = now
    end
    write = true
  elseif tat > horizon then
    allowed = 0
    retry_after = tat - horizon
  elseif consumes then
    tat = tat + need
    write = true
  end
  if write then
    state = tat > now and tat -- false: nothing ahead, no key
  end
  if figures then
    local ahead = tat - now
    if ahead < tolerance then
      local room = tolerance - ahead
      remaining = (room - room % interval) / interval
    end
    reset_after = ahead
  end
end
-- expiry
expiry_us = state -- the state is the instant the bucket is full again

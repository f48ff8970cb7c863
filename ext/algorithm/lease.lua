-- Sluice lease script for the bucket algorithms (token bucket and GCRA),
-- after the shared helpers (lib.lua). Both keep one integer, the time at
-- which the bucket is full again ("tat", Unix microseconds), so one script
-- leases from either.
--
-- A lease takes tokens for one holder (a process) to spend locally. Unlike
-- tokens taken by the decision script, they keep counting against the
-- limit until the holder reports them spent, releases them or the hold
-- ends: KEYS[2], the ledger, is a hash holder -> "reserved:expires_us",
-- and the bucket never holds more than burst less what is reserved. So the
-- tokens in the bucket and in every lease together never exceed burst, and
-- over any interval T the holders admit at most burst + rate x T.
--
-- A reservation that ends by expiry (its holder died, or could not
-- release) stops counting gradually: from its expiry the bucket refills
-- into it at the limit's rate, as if its tokens had been spent then.
--
-- The single script (lease_single.lua after this) takes one operation:
-- KEYS[1]  the state key (as the decision script's)
-- KEYS[2]  the ledger key, in the same slot
-- ARGV[1..3] rate, period_us, burst, as the prelude checks them
-- ARGV[4]  cost: op 1, 0..burst, decided as the decision script does
--          (0 with extra 0 peeks; 0 with extra > 0 refills: allowed when
--          a token is left); op 2, the unspent tokens given back, 0..1e12
-- ARGV[5]  op: 1 take, 2 release
-- ARGV[6]  extra: op 1, tokens to hold beyond cost, 0..1e12 (granted as
--          the lease rule allows, lease_grant)
-- ARGV[7]  held: op 1, what the holder still holds of its reservation
-- ARGV[8]  hold_us: op 1, how long the reservation lasts, 1000..3600000000
-- ARGV[9]  holder: a positive decimal integer of at most 19 digits
-- ARGV[10] now_us, optional (client clock), else TIME
-- The batch script (lease_batch.lua) takes m of them, for m key pairs:
-- ARGV[9i+1 .. 9i+9] is operation i's, and ARGV[9m+1] the optional now.
--
-- Reply: {allowed, remaining, retry_after_us, reset_after_us, granted,
-- expires_us, reserved}: granted is the extra tokens granted, reserved the
-- holder's reservation now and expires_us how long it lasts (0: none).
-- Errors, before any write: SLUICE_INVALID_KEY, SLUICE_INVALID_LIMIT,
-- SLUICE_INVALID_COST, SLUICE_COST_EXCEEDS_BURST, SLUICE_INVALID_STATE.
-- Keep in step with lease.go (leaseOp).

local TTL_MARGIN_MS = 1000

-- The lease rule: after a grant, a holder's unspent tokens are at most
-- 1 / (LEASE_SHARE + others) of those plus what the bucket has left, others
-- being the key's other live holders; so the bucket keeps at least three
-- times what any one holder holds, and as more processes lease the key,
-- each lease is smaller (lease.go: leaseGrant).
local LEASE_SHARE = 4

-- lease_grant is how many of extra tokens a holder holding held is granted
-- when the bucket has left after the request's cost and others hold
-- leases of the key too.
local function lease_grant(extra, burst, left, held, others)
  local most = math.floor((left + held) / (LEASE_SHARE + others)) - held
  if most <= 0 then
    return 0
  end
  return math.min(extra, burst, most)
end

-- lease_op runs one operation on key and ledger, its arguments at
-- ARGV[b + 1 .. b + 9], at now; it returns the reply, or nil and an error
-- message, before any write of its own.
local function lease_op(key, ledger, b, now)
if key == '' or ledger == '' then
  return nil, 'SLUICE_INVALID_KEY a state key and a ledger key expected'
end
local period_us = int_arg(b + 2, 1000, 31622400000000)
local rate = int_arg(b + 1, 1, math.min(period_us or 0, 1e12))
local burst = int_arg(b + 3, 1, 1e12)
if rate == nil or period_us == nil or burst == nil then
  return nil, 'SLUICE_INVALID_LIMIT rate, period_us and burst must be integers in range'
end
local op = int_arg(b + 5, 1, 2)
local cost = int_arg(b + 4, 0, 1e12)
local extra = int_arg(b + 6, 0, 1e12)
local held = int_arg(b + 7, 0, 1e12)
local hold_us = int_arg(b + 8, 1000, 3600000000)
if op == nil or cost == nil or extra == nil or held == nil or hold_us == nil then
  return nil, 'SLUICE_INVALID_COST op, cost, extra, held and hold_us must be integers in range'
end
local holder = ARGV[b + 9]
if #holder > 19 or not string.match(holder, '^[1-9]%d*$') then
  return nil, 'SLUICE_INVALID_COST holder must be a positive integer'
end

local interval = math.ceil(period_us / rate)
if (interval * rate - period_us) * 100 > period_us then
  return nil, ('SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds')
end
if interval > MAX_FILL_US / burst then
  return nil, ('SLUICE_INVALID_LIMIT burst x period / rate is too long')
end
if op == 1 and cost > burst then
  return nil, ('SLUICE_COST_EXCEEDS_BURST cost exceeds burst, so it can never be allowed')
end
local tolerance = burst * interval

local deficit = 0
local stored = redis.call('GET', key)
if stored then
  local tat = tonumber(stored)
  if tat == nil or tat ~= math.floor(tat) or tat < 0 or tat > MAX_NOW_US + MAX_FILL_US then
    return nil, ('SLUICE_INVALID_STATE key does not hold a bucket')
  end
  deficit = math.max(tat - now, 0)
end

-- The ledger: every reservation, live or expired.
local entries = redis.call('HGETALL', ledger)
local res, exp, fields = {}, {}, {}
local live, mine, mine_exp, others = 0, 0, 0, 0
for i = 1, #entries, 2 do
  local r, e = string.match(entries[i + 1], '^(%d+):(%d+)$')
  r, e = tonumber(r), tonumber(e)
  if r == nil or e == nil or r > 1e12 or e > MAX_NOW_US + 3600000000 then
    return nil, ('SLUICE_INVALID_STATE ledger does not hold leases')
  end
  local n = #res + 1
  res[n], exp[n], fields[n] = r, e, entries[i]
  if e > now then
    live = live + r
    if entries[i] == holder then
      mine, mine_exp = r, e
    else
      others = others + 1
    end
  end
end

-- The floor: the bucket holds at most burst less what live reservations
-- hold; a reservation that expired at e held its tokens until e and is
-- refilled at the rate since.
local floor = live * interval
local purged = false
for j = 1, #res do
  if exp[j] <= now then
    purged = true
    local s = 0
    for k = 1, #res do
      if exp[k] >= exp[j] then
        s = s + res[k]
      end
    end
    floor = math.max(floor, s * interval - (now - exp[j]))
  end
end
deficit = math.max(deficit, math.min(floor, tolerance))

local allowed, retry_after, granted = 1, 0, 0
local reserve = mine         -- the holder's reservation after this call
local reserve_exp = mine_exp -- and when it ends
local spent = false          -- the bucket changed
if op == 2 then
  local back = math.min(cost, mine)
  deficit = math.max(deficit - back * interval, 0)
  reserve = 0
  spent = true
else
  held = math.min(held, mine)
  if cost == 0 then
    -- A peek (extra 0) changes nothing; a refill (extra > 0) is granted
    -- when a token is left, and as many as are, up to extra.
    if deficit + interval > tolerance then
      allowed = 0
      retry_after = deficit + interval - tolerance
      if extra > 0 then
        reserve = held
      end
    elseif extra > 0 then
      granted = lease_grant(extra, burst, math.floor((tolerance - deficit) / interval), held, others)
      deficit = deficit + granted * interval
      spent = true
      reserve = held + granted
      reserve_exp = now + hold_us
    end
  else
    local after = deficit + cost * interval
    if after > tolerance then
      allowed = 0
      retry_after = after - tolerance
      if live + cost > burst then
        -- The reservations alone leave too little: nothing refills into
        -- them before the first ends.
        local first = 0
        for k = 1, #res do
          if exp[k] > now and (first == 0 or exp[k] < first) then
            first = exp[k]
          end
        end
        retry_after = retry_after + (first - now)
      end
      reserve = held
    else
      granted = lease_grant(extra, burst, math.floor((tolerance - after) / interval), held, others)
      deficit = after + granted * interval
      spent = true
      reserve = held + granted
      if granted > 0 then
        reserve_exp = now + hold_us
      end
    end
  end
end

-- Writes, all checks done.
local changed = purged or reserve ~= mine
if spent or changed then
  if deficit > 0 then
    redis.call('SET', key, string.format('%d', now + deficit),
      'PX', string.format('%d', math.ceil(deficit / 1000) + TTL_MARGIN_MS))
  else
    redis.call('DEL', key)
  end
end
if changed or (reserve > 0 and reserve_exp ~= mine_exp) then
  local last = 0
  for j = 1, #res do
    if exp[j] <= now then
      redis.call('HDEL', ledger, fields[j])
    elseif fields[j] ~= holder then
      last = math.max(last, exp[j])
    end
  end
  if reserve > 0 then
    redis.call('HSET', ledger, holder, string.format('%d:%d', reserve, reserve_exp))
    last = math.max(last, reserve_exp)
  elseif mine > 0 then
    redis.call('HDEL', ledger, holder)
  end
  if last > 0 then
    redis.call('PEXPIRE', ledger, string.format('%d', math.ceil((last - now) / 1000) + TTL_MARGIN_MS))
  end
end

local remaining = 0
if deficit < tolerance then
  remaining = math.floor((tolerance - deficit) / interval)
end
local expires = 0
if reserve > 0 then
  expires = reserve_exp - now
end
return {allowed, remaining, retry_after, deficit, granted, expires, reserve}
end

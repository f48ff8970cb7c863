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
-- and its numbers, packed into one argument (sluice.Script.Args) or one
-- per argument (each in decimal or as 0x and hex digits; read_args.lua),
-- in this order:
-- 1..3     rate, period_us, burst, as the prelude checks them
-- 4        cost: op 1, 0..burst, decided as the decision script does
--          (0 with extra 0 peeks; 0 with extra > 0 refills: allowed when
--          a token is left); op 2, the unspent tokens given back, 0..1e12
-- 5        op: 1 take, 2 release
-- 6        extra: op 1, tokens to hold beyond cost, 0..1e12 (granted as
--          the lease rule allows; lease.go: leaseGrant)
-- 7        held: op 1, what the holder still holds of its reservation
-- 8        hold_us: op 1, how long the reservation lasts, 1000..3600000000
-- 9        holder: a positive integer; one per argument, in decimal of
--          at most 19 digits or in hex (0x and at most 16 digits, no
--          leading zero), its text as sent names its reservation in the
--          ledger; packed, its text in hex, as Sluice's stores send it
-- 10       now_us, optional (client clock), else TIME
-- The batch script (lease_batch.lua) takes m of them, for m key pairs:
-- numbers 9i+1 .. 9i+9 are operation i's, and 9m+1 the optional now.
--
-- Reply: {allowed, remaining, retry_after_us, reset_after_us, granted,
-- expires_us, reserved}: granted is the extra tokens granted, reserved the
-- holder's reservation now and expires_us how long it lasts (0: none).
-- Errors, before any write: SLUICE_INVALID_KEY, SLUICE_INVALID_LIMIT,
-- SLUICE_INVALID_COST, SLUICE_COST_EXCEEDS_BURST, SLUICE_INVALID_STATE.
-- The bucket is read and written as the decision scripts read and write
-- it (ext/algorithm state_text.lua: the state in hex, the key expiring at
-- the whole second, or 32 seconds for a steady key, after the bucket is
-- full plus a second, a write that keeps that expiry a SETRANGE), so that
-- either reads the other's
-- state. Arithmetic is written out rather than through math.* and
-- helper functions (a C call costs several hundred instructions, a Lua
-- function call about 1,600; prelude.lua).
-- Keep in step with lease.go (leaseOp).

-- The numbers, packed or one per argument, read into args (read_args.lua):
-- READ_ARGS
local LEASE_SHARE = 4 -- the lease rule's (lease.go: leaseGrant)
local format, byte = string.format, string.byte

-- lease_op runs one operation on key and ledger, its numbers at
-- args[b + 1 .. b + 9], at now (the server's clock when server_clock);
-- it returns the reply, or nil and an error message, before any write of
-- its own.
local function lease_op(key, ledger, b, now, server_clock)
if key == '' or ledger == '' then
  return nil, 'SLUICE_INVALID_KEY a state key and a ledger key expected'
end
local rate, period_us, burst = args[b + 1], args[b + 2], args[b + 3]
local cost, op, extra, held, hold_us = args[b + 4], args[b + 5], args[b + 6], args[b + 7], args[b + 8]
if not (period_us and period_us >= 1000 and period_us <= 31622400000000 and period_us % 1 == 0
    and rate and rate >= 1 and rate <= period_us and rate <= 1e12 and rate % 1 == 0
    and burst and burst >= 1 and burst <= 1e12 and burst % 1 == 0) then
  return nil, 'SLUICE_INVALID_LIMIT rate, period_us and burst must be integers in range'
end
if not ((op == 1 or op == 2)
    and cost and cost >= 0 and cost <= 1e12 and cost % 1 == 0
    and extra and extra >= 0 and extra <= 1e12 and extra % 1 == 0
    and held and held >= 0 and held <= 1e12 and held % 1 == 0
    and hold_us and hold_us >= 1000 and hold_us <= 3600000000 and hold_us % 1 == 0) then
  return nil, 'SLUICE_INVALID_COST op, cost, extra, held and hold_us must be integers in range'
end
-- The holder's text names its reservation in the ledger: as sent, one per
-- argument (Sluice's stores send hex), or packed, written as they would
-- have sent it.
local holder
if packed then
  holder = args[b + 9]
  if not (holder and holder >= 1 and holder % 1 == 0) then
    return nil, 'SLUICE_INVALID_COST holder must be a positive integer'
  end
  holder = format('0x%x', holder)
else
  holder = ARGV[b + 9]
  if not (#holder <= 19 and string.match(holder, '^[1-9]%d*$') or #holder <= 18 and string.match(holder, '^0x[1-9a-f]%x*$')) then
    return nil, 'SLUICE_INVALID_COST holder must be a positive integer'
  end
end

local interval = (period_us - period_us % rate) / rate
if interval * rate < period_us then
  interval = interval + 1 -- ceil(period_us / rate)
end
if (interval * rate - period_us) * 100 > period_us then
  return nil, 'SLUICE_INVALID_LIMIT period / rate is not within 1% of a whole number of microseconds'
end
if interval > MAX_FILL_US / burst then
  return nil, 'SLUICE_INVALID_LIMIT burst x period / rate is too long'
end
if op == 1 and cost > burst then
  return nil, 'SLUICE_COST_EXCEEDS_BURST cost exceeds burst, so it can never be allowed'
end
local tolerance = burst * interval

-- The bucket, read as the decision scripts read it.
local raw = redis.call('GET', key)
local state, code, hex, keep_at, expiry_us = raw, -1, false, nil, 0
if raw then
-- PARSE
end
if state and not (state >= 0 and state <= MAX_NOW_US + MAX_FILL_US and state % 1 == 0) then
  return nil, 'SLUICE_INVALID_STATE key does not hold a bucket'
end
local deficit = 0
if state then
-- KEEP
  if state > now then
    deficit = state - now
  end
end

-- The ledger: every reservation, live or expired.
local entries = redis.call('HGETALL', ledger)
local res, exp, fields = {}, {}, {}
local live, mine, mine_exp, others = 0, 0, 0, 0
for i = 1, #entries, 2 do
  local r, e = string.match(entries[i + 1], '^(%d+):(%d+)$')
  r, e = tonumber(r), tonumber(e)
  if r == nil or e == nil or r > 1e12 or e > MAX_NOW_US + 3600000000 then
    return nil, 'SLUICE_INVALID_STATE ledger does not hold leases'
  end
  local n = (i + 1) / 2
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
    local f = s * interval - (now - exp[j])
    if f > floor then
      floor = f
    end
  end
end
if floor > tolerance then
  floor = tolerance
end
if floor > deficit then
  deficit = floor
end

local allowed, retry_after, granted = 1, 0, 0
local reserve = mine         -- the holder's reservation after this call
local reserve_exp = mine_exp -- and when it ends
local spent = false          -- the bucket changed
if op == 2 then
  local back = cost
  if mine < back then
    back = mine
  end
  deficit = deficit - back * interval
  if deficit < 0 then
    deficit = 0
  end
  reserve = 0
  spent = true
else
  if mine < held then
    held = mine
  end
  -- A take of cost > 0, decided as the decision script does; of cost 0,
  -- a peek (extra 0), which changes nothing, or a refill (extra > 0),
  -- granted when a token is left, and as many as are, up to extra.
  local after = deficit + cost * interval
  local need = after
  if cost == 0 then
    need = deficit + interval
  end
  if need > tolerance then
    allowed = 0
    retry_after = need - tolerance
    if cost > 0 and live + cost > burst then
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
    if cost > 0 or extra > 0 then
      reserve = held
    end
  elseif cost > 0 or extra > 0 then
    -- The lease rule: after a grant, a holder's unspent tokens are at
    -- most 1 / (LEASE_SHARE + others) of those plus what the bucket has
    -- left, so the bucket keeps at least three times what any one holder
    -- holds, and as more processes lease the key, each lease is smaller.
    local room = tolerance - after
    local left = (room - room % interval) / interval
    local share = LEASE_SHARE + others
    local most = (left + held - (left + held) % share) / share - held
    if most > 0 then
      granted = extra
      if burst < granted then
        granted = burst
      end
      if most < granted then
        granted = most
      end
    end
    deficit = after + granted * interval
    spent = true
    reserve = held + granted
    if cost == 0 or granted > 0 then
      reserve_exp = now + hold_us
    end
  end
end

-- Writes, all checks done.
local changed = purged or reserve ~= mine
if spent or changed then
  state = deficit > 0 and now + deficit -- false: a full bucket, no key
  local wkey = key
-- WRITE
end
if changed or (reserve > 0 and reserve_exp ~= mine_exp) then
  local last = 0
  for j = 1, #res do
    if exp[j] <= now then
      redis.call('HDEL', ledger, fields[j])
    elseif fields[j] ~= holder and exp[j] > last then
      last = exp[j]
    end
  end
  if reserve > 0 then
    redis.call('HSET', ledger, holder, format('%d:%d', reserve, reserve_exp))
    if reserve_exp > last then
      last = reserve_exp
    end
  elseif mine > 0 then
    redis.call('HDEL', ledger, holder)
  end
  if last > 0 then
    local us = last - now -- to the last reservation's end: the ledger lives that long, in whole milliseconds, plus a second
    redis.call('PEXPIRE', ledger, format('%d', (us - us % 1000) / 1000 + (us % 1000 > 0 and 1 or 0) + 1000))
  end
end

local remaining = 0
if deficit < tolerance then
  local room = tolerance - deficit
  remaining = (room - room % interval) / interval
end
local expires = 0
if reserve > 0 then
  expires = reserve_exp - now
end
return {allowed, remaining, retry_after, deficit, granted, expires, reserve}
end

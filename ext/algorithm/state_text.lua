-- Sluice state text: how a Steps algorithm's state is read, kept and
-- written. Each part below is written into step_body.lua and
-- batch_step.lua where a line "-- <PART>" stands; they use the locals
-- raw (the string read, or false), state, code, hex, keep_at, expiry_us,
-- wkey, server_clock, now, format and byte (DEFER also sets, nsets, ats,
-- last_at, last_text, last_state and last_state_text).
--
-- A state is stored as "0x" and 14 hex digits: tonumber reads hex with a
-- base through strtoul, at about a third of strtod's cost for decimal,
-- and a fixed width lets SETRANGE replace it in place. A decimal state (an
-- earlier version's) is still read; an earlier version reads the hex one
-- (tonumber without a base takes a 0x prefix).
--
-- A key expires at the whole second after its state's expiry instant
-- (the algorithm's expiry part), plus a second. With the server clock,
-- every write of a hex state leaves the key expiring at that instant or
-- later (KEEP reads it back from the state), so a write whose instant is
-- no later keeps the key's expiry and sends only SETRANGE: a key written
-- many times a second gets a new expiry about once a second. A key whose
-- state a write moves past its expiry (written again in a later second,
-- or a burst that moves the state a second or more) is steady: its new
-- expiry is the whole 32 seconds (STEADY_GRID_US, lib.lua) after the
-- instant, plus a second, and its text ends in a space, so that KEEP
-- reads that grid back. A key written once expires 1 to 2 s after its state, a steady key
-- 1 to 33 s after, and moves its expiry about once in 32 seconds of its
-- state rather than every second. An expiry set by an earlier version is
-- not trusted; with a clock passed in (now_us), the expiry is always set,
-- on the second's grid, relative to the server's clock (a key is decided
-- on one clock: states of two clocks mean different instants).

-- PARSE: raw -> state (an integer, or -1 when it is no number), code
-- (state when it is an integer in [0, 2^53], else -2) and hex (raw is
-- this version's text). Only a string of 17 characters (a steady key's,
-- whose trailing space tonumber skips) or 16 whose hex value is in range
-- reads as hex: an earlier version's decimal state is shorter or, at 16
-- digits, out of range as hex, and reads as decimal. Real Redis takes the
-- first branch for its own text; gopher-lua (miniredis), whose tonumber
-- takes a 0x prefix only without a base, the second.
local v = (#raw == 17 or #raw == 16) and tonumber(raw, 16)
if v and v <= 9007199254740992 then
  state, code, hex = v, v, true
else
  state = tonumber(raw) or -1
  code = state
  if not (state >= 0 and state <= 9007199254740992 and state % 1 == 0) then
    code = -2
  end
  hex = code >= 0 and (#raw == 17 or #raw == 16) and byte(raw, 2) == 120
end

-- KEEP: after the state check passed, the instant the key expires at or
-- after, when this version wrote it: on the 32-second grid when the key
-- is steady.
if server_clock and hex then
-- EXPIRY
  if #raw == 17 then
    keep_at = expiry_us - expiry_us % STEADY_GRID_US + STEADY_GRID_US + 1000000
  else
    keep_at = expiry_us - expiry_us % 1000000 + 2000000
  end
end

-- WRITE: state (false: delete) to wkey, for the single decision. (DEFER
-- below is the same rule for the many keys of a batch, which costs a
-- decision a table or two more.) SETRANGE writes the first 16
-- characters, "0x" and the digits, leaving a steady key's space.
if not state then
  redis.call('DEL', wkey)
else
-- EXPIRY
  local at = expiry_us - expiry_us % 1000000 + 2000000
  if keep_at and at <= keep_at then
    redis.call('SETRANGE', wkey, '0', format('0x%014x', state))
  elseif keep_at then
    at = expiry_us - expiry_us % STEADY_GRID_US + STEADY_GRID_US + 1000000
    redis.call('SET', wkey, format('0x%014x ', state), 'PXAT', format('%d', at / 1000))
  elseif server_clock then
    redis.call('SET', wkey, format('0x%014x', state), 'PXAT', format('%d', at / 1000))
  else
    local ms = at - now
    redis.call('SET', wkey, format('0x%014x', state), 'PX', format('%d', (ms - ms % 1000) / 1000))
  end
end

-- DEFER: as WRITE, for one of many keys: a state that needs a new expiry
-- joins sets (one MSET for all of them, then an expiry per key, costs
-- less than a SET with PXAT each) and ats, its expiry's text, written
-- out once for the keys that share it. A key's first state is written
-- out once for the keys that share it too (last_state_text): new keys
-- decided at one instant under one limit and cost, as a batch of
-- one-off clients, all get the same state.
if not state then
  redis.call('DEL', wkey)
else
-- EXPIRY
  local at = expiry_us - expiry_us % 1000000 + 2000000
  if keep_at and at <= keep_at then
    redis.call('SETRANGE', wkey, '0', format('0x%014x', state))
  else
    local text
    if keep_at then
      at = expiry_us - expiry_us % STEADY_GRID_US + STEADY_GRID_US + 1000000
      text = format('0x%014x ', state)
    else
      if state ~= last_state then
        last_state, last_state_text = state, format('0x%014x', state)
      end
      text = last_state_text
    end
    if at ~= last_at then
      last_at = at
      if server_clock then
        last_text = format('%d', at / 1000)
      else
        local ms = at - now
        last_text = format('%d', (ms - ms % 1000) / 1000)
      end
    end
    sets[nsets + 1] = wkey
    sets[nsets + 2] = text
    nsets = nsets + 2
    ats[nsets / 2] = last_text
  end
end

-- FLUSH: the writes DEFER joined: MSET, then each key's expiry.
if nsets > 0 then
  redis.call('MSET', unpack(sets, 1, nsets))
  local expire = server_clock and 'PEXPIREAT' or 'PEXPIRE'
  for w = 1, nsets / 2 do
    redis.call(expire, sets[2 * w - 1], ats[w])
  end
end

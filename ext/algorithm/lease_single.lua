-- One lease operation (lease.lua): KEYS[1], KEYS[2], its nine numbers,
-- and a tenth, the optional now_us.

if #KEYS ~= 2 then
  return redis.error_reply('SLUICE_INVALID_KEY a state key and a ledger key expected')
end
if nargs ~= 9 and nargs ~= 10 then
  return redis.error_reply('SLUICE_INVALID_LIMIT 9 or 10 arguments expected')
end
local now = args[10]
local server_clock = nargs == 9 -- now is the server's clock (TIME), not one passed in
if server_clock then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2] -- strings of digits, converted by the arithmetic
elseif not (now and now >= 0 and now <= MAX_NOW_US and now % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
end
local reply, err = lease_op(KEYS[1], KEYS[2], 0, now, server_clock)
if err then
  return redis.error_reply(err)
end
return reply

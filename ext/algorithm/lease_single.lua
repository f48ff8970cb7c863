-- One lease operation (lease.lua): KEYS[1], KEYS[2], ARGV[1..9], and
-- ARGV[10], the optional now_us.

if #KEYS ~= 2 then
  return redis.error_reply('SLUICE_INVALID_KEY a state key and a ledger key expected')
end
if #ARGV ~= 9 and #ARGV ~= 10 then
  return redis.error_reply('SLUICE_INVALID_LIMIT 9 or 10 arguments expected')
end
local now
if ARGV[10] == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = int_arg(10, 0, MAX_NOW_US)
end
if now == nil then
  return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
end
local reply, err = lease_op(KEYS[1], KEYS[2], 0, now)
if err then
  return redis.error_reply(err)
end
return reply

-- Many lease operations (lease.lua), takes and releases alike, in one
-- script, at one instant: KEYS
-- holds a state key and a ledger key per operation (on Redis Cluster, all
-- in one slot), its numbers 9 per operation and then the optional
-- now_us. A key may appear in one operation only.
--
-- Reply: per operation, lease_op's 7 values, or {-1, code, 0, 0, 0, 0, 0}
-- if it was rejected before anything was written for it; codes as in
-- batch.lua (1 SLUICE_INVALID_LIMIT, 2 SLUICE_INVALID_COST,
-- 3 SLUICE_COST_EXCEEDS_BURST, 4 SLUICE_INVALID_KEY, 5 SLUICE_INVALID_STATE
-- or WRONGTYPE, 6 anything else, 7 OOM).

local m = #KEYS / 2
if m < 1 or m > 256 or m % 1 ~= 0 then
  return redis.error_reply('SLUICE_INVALID_KEY a state key and a ledger key per operation expected (1 to 256)')
end
if nargs ~= 9 * m and nargs ~= 9 * m + 1 then
  return redis.error_reply('SLUICE_INVALID_LIMIT 9 arguments per operation expected')
end
local now = args[9 * m + 1]
local server_clock = nargs == 9 * m -- now is the server's clock (TIME), not one passed in
if server_clock then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2] -- strings of digits, converted by the arithmetic
elseif not (now and now >= 0 and now <= MAX_NOW_US and now % 1 == 0) then
  return redis.error_reply('SLUICE_INVALID_LIMIT now_us must be an integer in range')
end

local codes = {
  {'SLUICE_INVALID_LIMIT', 1}, {'SLUICE_INVALID_COST', 2}, {'SLUICE_COST_EXCEEDS_BURST', 3},
  {'SLUICE_INVALID_KEY', 4}, {'SLUICE_INVALID_STATE', 5}, {'WRONGTYPE', 5}, {'OOM', 7},
}
local out = {}
for i = 0, m - 1 do
  local ok, reply, err = pcall(lease_op, KEYS[2 * i + 1], KEYS[2 * i + 2], 9 * i, now, server_clock)
  if not ok then
    err = type(reply) == 'table' and reply.err or tostring(reply)
  end
  if ok and not err then
    for j = 1, 7 do
      out[#out + 1] = reply[j]
    end
  else
    local code = 6
    for _, c in ipairs(codes) do
      if string.find(err, c[1], 1, true) then
        code = c[2]
        break
      end
    end
    out[#out + 1], out[#out + 2] = -1, code
    for _ = 1, 5 do
      out[#out + 1] = 0
    end
  end
end
return out

-- Sluice's shared Lua helpers, placed at the top of every script (decision,
-- batch, multi-limit and lease) by algorithm.LibFor, so that they exist
-- once: int_arg only in a script that calls it (a body of an algorithm
-- of its own may), since defining a function costs every call.

local MAX_NOW_US = 4102444800000000 -- 2100-01-01 in Unix microseconds
local MAX_FILL_US = 316224000000000 -- the longest time to refill a state
local STEADY_GRID_US = 32000000 -- a steady key's expiry grid (state_text.lua)

-- int_arg returns ARGV[i] as an integer in [lo, hi], or nil.
local function int_arg(i, lo, hi)
  local v = tonumber(ARGV[i])
  if v == nil or v ~= v or v < lo or v > hi or v ~= math.floor(v) then
    return nil
  end
  return v
end

-- Each script reads its instant itself (ARGV or TIME) rather than through
-- a helper here: defining and calling one more function costs about 1,600
-- instructions per call (go run ./bench/cmd/sluice-instructions), 2% of a
-- decision.


-- Sluice's reading of a script's numeric arguments, written in where a
-- script has a line "-- READ_ARGS" (algorithm.ReadArgs): it leaves args,
-- a table of the numbers, and nargs, how many there are, and holds the
-- globals KEYS, ARGV, tonumber, redis and string in locals.
--
-- The numbers come packed into one argument (sluice.NewPackedScript,
-- Script.Args, which Sluice's stores send: 7 bytes each, big-endian two's
-- complement, in order; an argument alone of any other length is read as
-- one number), or one per argument: each in decimal,
-- or, when ARGV[1] starts with 0x, each one that is not negative as 0x
-- and hex digits (prelude.lua says why). Either way they are read once,
-- into args, before anything else (a number per argument that is not one
-- is nil there).
local KEYS, ARGV, tonumber, redis, string = KEYS, ARGV, tonumber, redis, string -- globals read more than once, held in locals (a global is a table lookup at each read)
local args, nargs
local packed = #ARGV == 1 and ARGV[1]
local size = packed and #packed
if size and size > 0 and size % 7 == 0 then
  nargs = size / 7
  local struct = rawget(_G, 'struct') -- nil in miniredis, which refuses to read a global it lacks
  if struct then
    args = {struct.unpack('>' .. string.rep('i7', nargs), packed)}
    args[nargs + 1] = nil -- unpack's next position
  else
-- UNPACK7
    args = v
  end
else
  nargs = #ARGV
  args = {}
  local hex = type(ARGV[1]) == 'string' and string.byte(ARGV[1], 2) == 120
  for i = 1, nargs do
    local v = hex and tonumber(ARGV[i], 16)
    if not (v and v <= 9007199254740992) then
      v = tonumber(ARGV[i]) -- decimal, negative (in decimal, which strtoul wraps), or on gopher-lua
    end
    args[i] = v
  end
end

-- Sluice's reading of a script's numeric arguments, written in where a
-- script has a line "-- READ_ARGS" (algorithm.ReadArgs): it leaves args,
-- a table of the numbers, nargs, how many there are, and packed, their
-- packed text or false when they came one per argument, and holds the
-- globals KEYS, ARGV, tonumber, redis and string in locals.
--
-- The numbers come packed into one argument (sluice.NewPackedScript,
-- Script.Args, which Sluice's stores send: 7 bytes each, big-endian two's
-- complement, in order; an argument alone of any other length is read as
-- one number), or one per argument, each in decimal or, when it starts
-- with 0x, in hex, both read by tonumber (a negative number goes in
-- decimal). Either way they are read once, into
-- args, before anything else (an argument that is not a number is nil
-- there).
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
  packed = false
  nargs = #ARGV
  args = {}
  for i = 1, nargs do
    args[i] = tonumber(ARGV[i])
  end
end

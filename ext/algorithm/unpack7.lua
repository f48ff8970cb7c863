-- Sluice's reading of numbers packed 7 bytes each (sluice.Script.Args),
-- big-endian two's complement, where Lua has no struct library
-- (gopher-lua, in miniredis; Redis reads them with struct.unpack). It is
-- written in where a script has a line "-- UNPACK7", with the locals
-- packed (the string) and size (its length, a multiple of 7), and leaves
-- v, a table of the numbers.
local v, byte = {}, string.byte
for i = 1, size, 7 do
  local b1, b2, b3, b4, b5, b6, b7 = byte(packed, i, i + 6)
  if b1 < 128 then
    v[#v + 1] = ((((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6) * 256 + b7)
  else -- negative: minus one more than its bytes' complement
    v[#v + 1] = -((((((255 - b1) * 256 + 255 - b2) * 256 + 255 - b3) * 256 + 255 - b4) * 256 + 255 - b5) * 256 + 255 - b6) * 256 - 256 + b7
  end
end

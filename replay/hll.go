package replay

import (
	"math"
	"math/bits"
)

// distinct estimates how many distinct keys were added, in a fixed 16 KiB
// (a HyperLogLog of 2^14 registers: a standard error of about 0.8%),
// where the report's key table forgets keys. It hashes with FNV-1a and a
// fixed mixer, so the same keys give the same estimate on every run.
type distinct struct {
	reg [1 << hllBits]uint8
}

const hllBits = 14

func (d *distinct) add(key string) {
	h := mix(fnv1a(key))
	i := h >> (64 - hllBits)
	rank := uint8(bits.LeadingZeros64(h<<hllBits|1<<(hllBits-1)) + 1)
	if rank > d.reg[i] {
		d.reg[i] = rank
	}
}

// estimate is the HyperLogLog estimate, with linear counting for small
// cardinalities, rounded to a whole number.
func (d *distinct) estimate() int64 {
	const m = float64(1 << hllBits)
	sum, zeros := 0.0, 0
	for _, r := range d.reg {
		sum += 1 / float64(uint64(1)<<r)
		if r == 0 {
			zeros++
		}
	}
	e := 0.7213 / (1 + 1.079/m) * m * m / sum
	if e <= 2.5*m && zeros > 0 {
		e = m * math.Log(m/float64(zeros))
	}
	return int64(math.Round(e))
}

func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix is splitmix64's finalizer: FNV-1a's low bits are not uniform enough
// for HyperLogLog on keys that differ only at their end.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

package ext

import "strings"

// HashSlot returns the Redis Cluster slot of key (CRC16 of its hash tag, or
// of the whole key when it has none, modulo 16384), as CLUSTER KEYSLOT does.
func HashSlot(key string) int { return int(crc16(hashed(key)) % 16384) }

// HashTag returns key's Redis hash tag, as [HashSlot] reads it, or "" when
// the whole key is hashed.
func HashTag(key string) string {
	if h := hashed(key); len(h) < len(key) {
		return h
	}
	return ""
}

// hashed is the part of key Redis Cluster hashes: the text between the
// first '{' and the next '}' when that is not empty, else the whole key.
func hashed(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// crc16 is CRC16-CCITT (XMODEM), the checksum Redis Cluster uses for slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

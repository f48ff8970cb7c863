package sluice

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"time"
)

// Store runs a [Script] atomically and returns its integer replies: an
// array of integers, or one integer as a slice of one.
//
// Redis backends send EVALSHA and fall back to one EVAL when the server
// answers NOSCRIPT (after a restart, a failover or SCRIPT FLUSH), so a lost
// script cache costs one extra round trip, never an error. In-process
// backends run the script's [LocalFunc] instead of its Lua source.
//
// Every key a script touches must hash to the same Redis Cluster slot; build
// keys with [Key]. Backends never dial, never close the caller's client and
// do no I/O in their constructors.
type Store interface {
	Run(ctx context.Context, script *Script, keys []string, args []int64) ([]int64, error)
}

// Script is a Lua script paired with its in-process twin.
//
// Source is run by Redis backends; Local by in-process backends. The two
// must agree on every input: the conformance suite in sluicetest checks it.
type Script struct {
	source string
	sha1   string
	local  LocalFunc
	hex    bool
	packed bool
}

// NewScript returns a Script for the Lua source and its Go twin. local may
// be nil for a script that only runs on Redis.
func NewScript(source string, local LocalFunc) *Script {
	sum := sha1.Sum([]byte(source))
	return &Script{source: source, sha1: hex.EncodeToString(sum[:]), local: local}
}

// NewHexScript is [NewScript] for a script that reads its numeric
// arguments in hex as well as in decimal ([Script.Arg]): Lua's tonumber
// reads "0x1f" as 31, and tonumber(s, 16) reads hex through strtoul at
// less than half the cost of decimal through strtod.
func NewHexScript(source string, local LocalFunc) *Script {
	s := NewScript(source, local)
	s.hex = true
	return s
}

// NewPackedScript is [NewHexScript] for a script that also reads its
// numbers packed into one argument ([Script.Args]): one call of Redis's
// struct.unpack reads them all, where a number per argument costs a
// tonumber call each, and Redis handles one argument instead of several.
// The script tells the two forms apart by their count, so its arguments
// one per number must never be exactly one.
func NewPackedScript(source string, local LocalFunc) *Script {
	s := NewHexScript(source, local)
	s.packed = true
	return s
}

// maxPacked is the largest magnitude Args packs: a Lua number (a double)
// holds every integer up to it exactly.
const maxPacked = 1 << 53

// Args returns args as a Redis store sends them to the script. For a
// script made by [NewPackedScript] that is one argument holding every
// number as 7 bytes, big-endian two's complement, in order, when each is
// within ±2^53 (a Lua number carries no more exactly); otherwise, and for
// every other script, one argument per number, as [Script.Arg] writes it.
// Sluice's stores send Args.
func (s *Script) Args(args []int64) []string {
	if s.packed && len(args) > 0 {
		buf := make([]byte, 0, 7*len(args))
		for _, v := range args {
			if v > maxPacked || v < -maxPacked {
				buf = nil
				break
			}
			buf = append(buf, byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		}
		if buf != nil {
			return []string{string(buf)}
		}
	}
	out := make([]string, len(args))
	for i, v := range args {
		out[i] = s.Arg(v)
	}
	return out
}

// Arg returns v as a Redis store sends it to the script: "0x" and hex
// digits when the script was made by [NewHexScript] and v is not
// negative, else decimal. A store that sends decimal to every script
// is still correct, only slower.
func (s *Script) Arg(v int64) string {
	if s.hex && v >= 0 {
		return "0x" + strconv.FormatInt(v, 16)
	}
	return strconv.FormatInt(v, 10)
}

// Source returns the Lua source.
func (s *Script) Source() string { return s.source }

// SHA1 returns the hex SHA1 of the source, as EVALSHA expects.
func (s *Script) SHA1() string { return s.sha1 }

// Local returns the in-process twin of the script, or nil.
func (s *Script) Local() LocalFunc { return s.local }

// LocalFunc runs a script's logic in process. It reads and writes state
// through tx, which the store holds exclusively for the duration of the
// call (the in-process equivalent of a script's atomicity). It returns the
// same replies as the Lua script, or an error where the script would reply
// with one.
type LocalFunc func(tx LocalTx, keys []string, args []int64) ([]int64, error)

// LocalTx is the state an in-process store lends to a [LocalFunc].
type LocalTx interface {
	// NowMicros is the store's clock in Unix microseconds: the in-process
	// equivalent of Redis TIME.
	NowMicros() int64
	// Get returns the integer stored at key, if any and not expired; a key
	// holding a structured value (see Load) reads as missing.
	Get(key string) (int64, bool)
	// Set stores v at key, expiring after ttl.
	Set(key string, v int64, ttl time.Duration)
	// Load returns the structured value stored at key (a window's counts,
	// a log of timestamps), if any and not expired; a key holding an
	// integer reads as missing. The value is the one passed to Store:
	// scripts that change it in place must Store it again.
	Load(key string) (any, bool)
	// Store stores a structured value at key, expiring after ttl.
	Store(key string, v any, ttl time.Duration)
	// Del removes key.
	Del(key string)
}

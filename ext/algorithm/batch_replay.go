package algorithm

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// wordBits is how many allowed bits a step batch packs into one integer.
const wordBits = 50

// Codes of a key's state in a step batch's reply (batch_step.lua).
const (
	stateMissing   = -1 // no key
	stateNotNumber = -2 // a string that is not a state: not a number, negative, fractional or past 2^53
	stateWrongType = -3 // a key of another type
)

// runStepBatch is batch_step.lua's Go twin: the state each key held, then
// each request decided as the algorithm's own script decides it, its
// allowed bit packed.
func runStepBatch(tx sluice.LocalTx, keys []string, args []int64, decide DecideFunc) ([]int64, error) {
	b, now, err := parseBatchArgs(tx, keys, args)
	if err != nil {
		return nil, err
	}
	reply := make([]int64, 0, 1+len(keys)+(len(b.reqs)+wordBits-1)/wordBits)
	reply = append(reply, now)
	for _, key := range keys {
		switch v, ok := tx.Get(key); {
		case !ok:
			reply = append(reply, stateMissing)
		case v < 0 || v > 1<<53:
			reply = append(reply, stateNotNumber)
		default:
			reply = append(reply, v)
		}
	}
	var word int64
	for i, ref := range b.reqs {
		if r, err := decideRequest(tx, b.keys[ref[0]], b.shapes[ref[1]], now, decide); err == nil && r[0] == 1 {
			word |= 1 << (i % wordBits)
		}
		if i%wordBits == wordBits-1 || i == len(b.reqs)-1 {
			reply = append(reply, word)
			word = 0
		}
	}
	return reply, nil
}

// replayBatch turns a step batch's reply into results: it decides the
// requests again on the algorithm's Go twin, from the states the script
// read and at its instant, which gives every figure of every decision,
// and requires the twin's allowed to be the script's for each request.
func (l *Limiter) replayBatch(reqs []sluice.Request, keys []string, keyOf []int, reply []int64) ([]sluice.Result, error) {
	words := (len(reqs) + wordBits - 1) / wordBits
	if len(reply) != 1+len(keys)+words {
		return nil, fmt.Errorf("%w: %d values for %d requests on %d keys", sluice.ErrUnexpectedReply, len(reply), len(reqs), len(keys))
	}
	tx := &replayTx{StatesTx: StatesTx{Now: reply[0], States: make(map[string]int64, len(keys))}, bad: map[string]bool{}}
	if tx.Now < 0 || tx.Now > MaxNowMicros {
		return nil, fmt.Errorf("%w: instant %d", sluice.ErrUnexpectedReply, tx.Now)
	}
	for j, key := range keys {
		switch v := reply[1+j]; {
		case v >= 0:
			tx.States[key] = v
		case v == stateMissing:
		case v == stateNotNumber || v == stateWrongType:
			tx.bad[key] = true
		default:
			return nil, fmt.Errorf("%w: state code %d", sluice.ErrUnexpectedReply, v)
		}
	}
	results := make([]sluice.Result, len(reqs))
	for i, r := range reqs {
		a := Args{Key: keys[keyOf[i]], Rate: r.Limit.Rate, PeriodUs: r.Limit.PeriodMicros(), Burst: r.Limit.Burst, Cost: r.N, Now: tx.Now}
		tx.readBad = false
		d, err := l.spec.Decide(tx, a, false)
		if err == nil && tx.readBad {
			err = errModelBadState
		}
		scriptAllowed := reply[1+len(keys)+i/wordBits]>>(i%wordBits)&1 == 1
		if (err == nil && d[0] == 1) != scriptAllowed {
			return nil, fmt.Errorf("%w: request %d: the script and its Go twin disagree on whether it is allowed", sluice.ErrUnexpectedReply, i)
		}
		if err != nil {
			results[i].Err = fmt.Errorf("request %d: %w", i, l.batchError(batchErrorCode(err)))
			continue
		}
		results[i].Decision, results[i].Err = l.parseReply(d, r.Limit)
	}
	return results, nil
}

// errModelBadState stands for a request whose key holds no state of the
// algorithm (batch code 5), as the script fails it.
var errModelBadState = ext.NewServerError("SLUICE_INVALID_STATE key does not hold a state of this algorithm")

// StatesTx is a [sluice.LocalTx] over the integer states a script read,
// at the instant it read them, for a caller that decides again on the Go
// twins what the script decided, to work out figures the script did not
// reply (AllowBatch, multilimit). Set and Del change only States; Load
// reads as missing and Store keeps nothing: a Steps algorithm's state is
// one integer.
type StatesTx struct {
	Now    int64            // Unix microseconds
	States map[string]int64 // key -> state; a missing key is no state
}

func (t *StatesTx) NowMicros() int64                         { return t.Now }
func (t *StatesTx) Get(key string) (int64, bool)             { v, ok := t.States[key]; return v, ok }
func (t *StatesTx) Set(key string, v int64, _ time.Duration) { t.States[key] = v }
func (t *StatesTx) Del(key string)                           { delete(t.States, key) }
func (t *StatesTx) Load(string) (any, bool)                  { return nil, false }
func (t *StatesTx) Store(string, any, time.Duration)         {}

// replayTx is the LocalTx of a replay: the states a step batch read,
// changed as the twin decides, at the batch's instant, with the keys that
// held no integer state.
type replayTx struct {
	StatesTx
	bad     map[string]bool // keys that held no integer state
	readBad bool            // the last decision read a bad key
}

func (t *replayTx) Get(key string) (int64, bool) {
	if t.bad[key] {
		t.readBad = true
		return 0, false
	}
	return t.StatesTx.Get(key)
}

// Set and Del leave a bad key bad: the script decides none of its
// requests and writes nothing to it.
func (t *replayTx) Set(key string, v int64, ttl time.Duration) {
	if !t.bad[key] {
		t.StatesTx.Set(key, v, ttl)
	}
}

func (t *replayTx) Del(key string) {
	if !t.bad[key] {
		t.StatesTx.Del(key)
	}
}

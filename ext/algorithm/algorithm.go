// Package algorithm declares a rate-limit algorithm from its Lua body and
// its Go twin, and supplies the rest: the shared prelude that parses and
// validates the common arguments before any write (and its Go twin,
// [ParseArgs]), the batch script that decides many requests in one call
// (so that coalesce and shard batch it), leasing where the state holds
// reservations ([NewLeasing]), and the [Limiter] that validates input,
// sends the scripts through a [sluice.Store] and turns replies into
// Decisions. Every built-in algorithm is one [Spec] given to [Register].
//
// An algorithm supplies its script body, its key suffix, how it reads a
// Limit (its capacity, any extra validation), its reset script, and the
// twin of its body ([DecideFunc]); the twin runs in memstore, so the same
// algorithm decides in process, on the embedded miniredis and on Redis.
// A decision body replies {allowed (0|1), remaining, retry_after_us,
// reset_after_us}; the decision script of an algorithm given as steps
// replies with one integer from which the limiter works out those figures
// on the Go twin (step_body.lua).
package algorithm

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

//go:embed prelude.lua
var preludeSource string

//go:embed unpack7.lua
var unpack7Source string

//go:embed read_args.lua
var readArgsSource string

// prelude is prelude.lua with the reading of packed numbers where Lua has
// no struct library (unpack7.lua) written in.
var prelude = writeIn(preludeSource, "UNPACK7", unpack7Source)

// readArgs is read_args.lua with unpack7.lua written in.
var readArgs = writeIn(readArgsSource, "UNPACK7", unpack7Source)

// ReadArgs returns the Lua text that reads a script's numeric arguments,
// packed into one (sluice.NewPackedScript, Script.Args) or one per
// argument, into the locals args (a table of the numbers, nil for an
// argument that is not one) and nargs, for a script that takes only
// numbers to begin with (multilimit's do). read_args.lua has the
// contract.
func ReadArgs() string { return readArgs }

// writeIn writes text into source in place of its line "-- NAME".
func writeIn(source, name, text string) string {
	line := "\n-- " + name + "\n"
	if !strings.Contains(source, line) {
		panic("algorithm: a script has no " + strings.TrimSpace(line) + " line")
	}
	return strings.Replace(source, line, "\n"+text, 1)
}

//go:embed lib.lua
var lib string

// Lib returns the Lua helpers every Sluice script starts with (int_arg
// and the bounds it and the prelude check), for scripts assembled
// elsewhere.
func Lib() string { return lib }

// LibFor returns the part of Lib a script made of source needs, to put
// before it: the bounds, and int_arg only when source names it outside a
// comment (a function defined on every call costs a few hundred
// instructions).
func LibFor(source string) string {
	if names(source, intArgName) {
		return lib
	}
	bounds, _, _ := strings.Cut(lib, "-- int_arg returns")
	return bounds
}

var (
	intArgName = regexp.MustCompile(`\bint_arg\b`)
	argvName   = regexp.MustCompile(`\b(ARGV|int_arg)\b`)
)

// names reports whether source matches name outside "--" comments.
func names(source string, name *regexp.Regexp) bool {
	for _, line := range strings.Split(source, "\n") {
		code, _, _ := strings.Cut(line, "--")
		if name.MatchString(code) {
			return true
		}
	}
	return false
}

// DecideFunc is the Go twin of an algorithm's script body: given the
// prelude's parsed arguments it validates what the body validates,
// decides, and writes unless dry (see the prelude's dry), returning the
// body's reply.
type DecideFunc func(tx sluice.LocalTx, a Args, dry bool) ([]int64, error)

// NewScript returns the decision script made of the shared prelude and
// body, paired with its Go twin: ParseArgs, then decide (never dry). Its
// numbers go packed into one argument (sluice.NewPackedScript), unless
// body reads ARGV or calls int_arg outside a comment: then one per
// argument, as it reads them.
func NewScript(body string, decide DecideFunc) *sluice.Script {
	newScript := sluice.NewPackedScript
	if names(body, argvName) {
		newScript = sluice.NewHexScript
	}
	return newScript(LibFor(prelude+body)+prelude+body, func(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
		a, err := ParseArgs(tx, keys, args)
		if err != nil {
			return nil, err
		}
		return decide(tx, a, false)
	})
}

// newStepScript returns the decision script of an algorithm given as
// steps (the prelude and body, step_body.lua filled in), paired with
// its Go twin: ParseArgs, then Decide, replying as the script does
// (stepReply).
func newStepScript(spec *Spec, body string) *sluice.Script {
	return sluice.NewPackedScript(LibFor(prelude+body)+prelude+body, func(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
		a, err := ParseArgs(tx, keys, args)
		if err != nil {
			return nil, err
		}
		var offset int64
		if state, ok := tx.Get(a.Key); ok && state > a.Now {
			offset = state - a.Now
		}
		reply, err := spec.Decide(tx, a, false)
		if err != nil {
			return nil, err
		}
		return []int64{stepReply(offset, reply[0])}, nil
	})
}

// stepReply is a Steps algorithm's decision reply (step_body.lua): the
// state read less now (0 when missing or not after now), times 2, plus
// allowed.
func stepReply(offset, allowed int64) int64 { return offset*2 + allowed }

// replaySingle turns a Steps algorithm's decision reply into the
// decision: it decides the request again on the Go twin from the state
// the reply gives, at an instant of 0 (such an algorithm decides on its
// state less now alone), and requires the twin's allowed to be the
// script's.
func (l *Limiter) replaySingle(reply []int64, a Args, limit sluice.Limit) (sluice.Decision, error) {
	if len(reply) != 1 || reply[0] < 0 || reply[0]>>1 > MaxNowMicros+MaxFillMicros {
		return sluice.Decision{}, fmt.Errorf("%s: %w: %v", l.spec.Name, sluice.ErrUnexpectedReply, reply)
	}
	offset, scriptAllowed := reply[0]>>1, reply[0]&1
	tx := &StatesTx{States: map[string]int64{}}
	if offset > 0 {
		tx.States[a.Key] = offset
	}
	a.Now = 0
	d, err := l.spec.Decide(tx, a, false)
	if err != nil {
		return sluice.Decision{}, fmt.Errorf("%s: %w: the Go twin refuses the state the script decided on: %v", l.spec.Name, sluice.ErrUnexpectedReply, err)
	}
	if d[0] != scriptAllowed {
		return sluice.Decision{}, fmt.Errorf("%s: %w: the script and its Go twin disagree on whether it is allowed", l.spec.Name, sluice.ErrUnexpectedReply)
	}
	return l.parseReply(d, limit)
}

// Bounds shared by the prelude and ParseArgs.
const (
	MaxNowMicros  = 4102444800000000 // 2100-01-01
	MaxFillMicros = 316224000000000  // 10 x 366 days
	maxPeriodUs   = 31622400000000   // 366 days
	maxRateBurst  = 1_000_000_000_000
)

// The prelude's error replies, as the Go twins return them.
var (
	ErrModelInvalidKey   = ext.NewServerError("SLUICE_INVALID_KEY one non-empty key expected")
	ErrModelInvalidArgs  = ext.NewServerError("SLUICE_INVALID_LIMIT 4 or 5 arguments expected")
	ErrModelInvalidLimit = ext.NewServerError("SLUICE_INVALID_LIMIT rate, period_us and burst must be integers in range")
	ErrModelInvalidCost  = ext.NewServerError("SLUICE_INVALID_COST cost must be an integer")
	ErrModelInvalidNow   = ext.NewServerError("SLUICE_INVALID_LIMIT now_us must be an integer in range")
)

// Args are the prelude's parsed arguments.
type Args struct {
	Key                         string
	Rate, PeriodUs, Burst, Cost int64
	Now                         int64 // Unix microseconds
}

// ParseArgs is the Go twin of the prelude: the same checks in the same
// order, with tx's clock standing in for TIME.
func ParseArgs(tx sluice.LocalTx, keys []string, args []int64) (Args, error) {
	if len(keys) != 1 || keys[0] == "" {
		return Args{}, ErrModelInvalidKey
	}
	if len(args) != 4 && len(args) != 5 {
		return Args{}, ErrModelInvalidArgs
	}
	a := Args{Key: keys[0], Rate: args[0], PeriodUs: args[1], Burst: args[2], Cost: args[3]}
	if err := a.checkLimitAndCost(); err != nil {
		return Args{}, err
	}
	a.Now = tx.NowMicros()
	if len(args) == 5 {
		a.Now = args[4]
		if a.Now < 0 || a.Now > MaxNowMicros {
			return Args{}, ErrModelInvalidNow
		}
	}
	return a, nil
}

// checkLimitAndCost is the prelude's check of rate, period_us, burst and
// cost, which the batch scripts make of each shape too.
func (a Args) checkLimitAndCost() error {
	if a.PeriodUs < 1000 || a.PeriodUs > maxPeriodUs || a.Rate < 1 || a.Rate > min(a.PeriodUs, maxRateBurst) ||
		a.Burst < 1 || a.Burst > maxRateBurst {
		return ErrModelInvalidLimit
	}
	if a.Cost < -maxRateBurst || a.Cost > maxRateBurst {
		return ErrModelInvalidCost
	}
	return nil
}

// Reply is a decision script's reply.
type Reply struct {
	Allowed                    bool
	Remaining                  int64
	RetryAfterUs, ResetAfterUs int64
}

// Ints returns the reply as the script's integers.
func (r Reply) Ints() []int64 {
	var allowed int64
	if r.Allowed {
		allowed = 1
	}
	return []int64{allowed, r.Remaining, r.RetryAfterUs, r.ResetAfterUs}
}

// ExpiryTTL is the time to live, at now (Unix microseconds), of a Steps
// algorithm's key whose state decides as a missing key from expiry on:
// until the whole second after expiry, plus one second, as the scripts
// set it on a key's first write (state_text.lua). The scripts keep a key
// whose state a write moved past its expiry up to 32 s longer; a key that
// is gone decides as that state would, so the twins' decisions are the
// same.
func ExpiryTTL(now, expiry int64) time.Duration {
	at := expiry - expiry%1_000_000 + 2_000_000
	return time.Duration(at-now) * time.Microsecond
}

// Spec describes an algorithm to [New].
type Spec struct {
	// Name prefixes errors ("tokenbucket: ...") and names the algorithm
	// in the registry (see Register).
	Name string
	// Body is the decision script's body, run after the prelude; it
	// reads the prelude's locals, honours dry, and ends with a return.
	// In a batch (batch.lua) a key that repeats is decided through a
	// cache of GET, SET and DEL: there a body may only SET key value PX
	// ms and DEL one key, and may not use redis.pcall (other forms fail
	// loudly); any other command is passed through. The reply's remaining
	// must not be negative (a batch packs it with allowed).
	// An algorithm whose state is one integer may give Steps instead.
	Body string
	// Steps, given instead of Body by an algorithm whose state is one
	// integer in [0, 2^53], is its decision in four parts, with the lines
	// "-- state", "-- step" and "-- expiry" between them. The check reads
	// the prelude's locals and sets the local fail to an error reply's
	// text when the request cannot be decided. The state part reads only
	// state (the stored integer; false when the key is missing, -1 when
	// it holds something that is not a number) and sets fail when it is
	// not one of the algorithm's. The step, which cannot fail, then reads
	// the state and now, honours dry, and sets allowed (0 or 1) and
	// retry_after, and remaining and reset_after only when figures is
	// true (a batch leaves them to Decide); to write, it sets write and
	// the new state (false: delete the key). The expiry part sets
	// expiry_us, from state alone, to the instant from which that state
	// decides as a missing key: the key expires at the whole second after
	// it plus one second ([ExpiryTTL]), or on a 32-second grid once a
	// write has moved the state past the key's expiry (state_text.lua).
	// None of them calls Redis or
	// returns. Register builds Body from them (step_body.lua), and a
	// batch (batch_step.lua) that reads each key once and decides all its
	// requests in memory; Decide must then use only Get, Set and Del of
	// its key, and give Set the TTL [ExpiryTTL] gives.
	Steps string
	// Decide is Body's Go twin.
	Decide DecideFunc
	// Script decides: the prelude and Body, paired with Decide; for an
	// algorithm given as steps, the prelude and the steps replying with
	// one integer (step_body.lua), so that Redis returns no table, and
	// a Steps algorithm must decide on its state less now alone, a state
	// at or before now as a missing key. Register sets it.
	Script *sluice.Script
	// BatchScript decides many requests in one call (batch_args.lua, then
	// batch_step.lua around Steps or batch.lua around Body). Register sets
	// it.
	BatchScript *sluice.Script
	// ResetScript deletes the state of KEYS[1]; it takes the same
	// arguments as Script with a cost of 0.
	ResetScript *sluice.Script
	// KeySuffix is appended to the caller's key to name the state key.
	KeySuffix string
	// ValidateLimit checks what the algorithm needs beyond
	// Limit.Validate; nil when nothing.
	ValidateLimit func(sluice.Limit) error
	// Capacity is the largest cost that can ever be allowed under a
	// valid limit: Burst for buckets, Rate for windows.
	Capacity func(sluice.Limit) int64
	// MaxReplyMicros bounds the durations a reply may carry.
	MaxReplyMicros int64
	// Leases says the state is one integer, the time the bucket is full
	// again, so that LeaseScript leases from it ([ext.Leaser]).
	Leases bool
}

var registry = map[string]*Spec{}

// Register completes spec (its Body from Steps when they are given, its
// Script from Body and Decide, its BatchScript) and records it under
// spec.Name, for scripts that combine algorithms (multilimit).
// Algorithm packages call it once, when they initialise; a second spec of
// the same name panics, as that is a programming error.
func Register(spec *Spec) *Spec {
	if _, dup := registry[spec.Name]; dup {
		panic("algorithm: algorithm " + spec.Name + " registered twice")
	}
	if spec.Steps != "" {
		check, state, step, expiry := splitSteps(spec)
		spec.Body = fillSteps(stepTemplate(false), check, state, step, expiry)
		spec.BatchScript = newStepBatchScript(spec, check, state, step, expiry)
		spec.Script = newStepScript(spec, fillSteps(stepTemplate(true), check, state, step, expiry))
	} else {
		spec.BatchScript = newBatchScript(spec)
		spec.Script = NewScript(spec.Body, spec.Decide)
	}
	registry[spec.Name] = spec
	return spec
}

// Registered returns the spec registered under name, or nil. Specs are
// registered while their packages initialise, so a package that imports
// them may look them up from its own initialisation on.
func Registered(name string) *Spec { return registry[name] }

// Prelude returns the shared prelude, with the helpers it uses (Lib)
// before it: a script of its own once a body and its return follow.
func Prelude() string { return lib + prelude }

// Option configures a [Limiter]. Algorithm packages re-export it. A nil
// Option is an error, as is an option given a bad value.
type Option func(*Limiter) error

// WithClock makes the limiter send clock's time with every call instead of
// letting the script read the Redis server clock (client-clock mode).
func WithClock(clock sluice.Clock) Option {
	return func(l *Limiter) error {
		if clock == nil {
			return fmt.Errorf("%s: WithClock(nil): omit the option to use the server clock", l.spec.Name)
		}
		l.clock = clock
		return nil
	}
}

// Limiter runs an algorithm's scripts. It is safe for concurrent use.
type Limiter struct {
	spec  *Spec
	store sluice.Store
	clock sluice.Clock // nil: the script reads the server clock
}

var (
	_ sluice.Limiter      = (*Limiter)(nil)
	_ sluice.Refunder     = (*Limiter)(nil)
	_ sluice.Resetter     = (*Limiter)(nil)
	_ sluice.BatchLimiter = (*Limiter)(nil)
	_ sluice.Bounded      = (*Limiter)(nil)
)

// New returns a Limiter for spec on store. It does no I/O.
func New(spec *Spec, store sluice.Store, opts ...Option) (*Limiter, error) {
	if spec == nil || spec.Script == nil {
		return nil, errors.New("algorithm: a registered spec is required (see Register)")
	}
	if ext.IsNil(store) {
		return nil, fmt.Errorf("%s: store must not be nil", spec.Name)
	}
	l := &Limiter{spec: spec, store: store}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%s: option %d is nil", spec.Name, i)
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// ValidateLimit applies Limit.Validate and the algorithm's own check.
func (l *Limiter) ValidateLimit(limit sluice.Limit) error {
	if err := l.spec.CheckLimit(limit); err != nil {
		return fmt.Errorf("%s: %w", l.spec.Name, err)
	}
	return nil
}

// Capacity returns the largest cost limit can ever allow, whatever the
// key (see [sluice.Bounded]), or why the algorithm cannot enforce limit.
func (l *Limiter) Capacity(_ string, limit sluice.Limit) (int64, error) {
	if err := l.ValidateLimit(limit); err != nil {
		return 0, err
	}
	return l.spec.Capacity(limit), nil
}

// CheckLimit reports whether the algorithm can enforce limit: it must pass
// [sluice.Limit.Validate] and the spec's own ValidateLimit. Every caller of
// an algorithm's scripts (its Limiter, multilimit) checks limits here.
func (s *Spec) CheckLimit(limit sluice.Limit) error {
	if err := limit.Validate(); err != nil {
		return err
	}
	if s.ValidateLimit != nil {
		return s.ValidateLimit(limit)
	}
	return nil
}

// CheckCost reports whether a request of cost n can ever be decided under
// limit: 0 <= n <= the algorithm's capacity.
func (s *Spec) CheckCost(limit sluice.Limit, n int64) error {
	return ext.CheckCost(limit, n, s.Capacity(limit))
}

// AllowN decides a request of cost n (0 peeks).
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	if err := l.check(key, limit); err != nil {
		return sluice.Decision{}, err
	}
	if err := l.validateCost(limit, n); err != nil {
		return sluice.Decision{}, err
	}
	return l.run(ctx, key, limit, n)
}

// Refund gives n cost units back to key, as if a request had not used
// them. It returns the state after the refund, with Allowed true.
func (l *Limiter) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	if err := l.check(key, limit); err != nil {
		return sluice.Decision{}, err
	}
	if n < 1 {
		return sluice.Decision{}, fmt.Errorf("%s: %w: a refund must be at least 1, got %d", l.spec.Name, sluice.ErrInvalidCost, n)
	}
	if err := l.validateCost(limit, n); err != nil {
		return sluice.Decision{}, err
	}
	return l.run(ctx, key, limit, -n)
}

// Reset deletes key's state: the next request sees a fresh limit.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	if err := ext.ValidateKey(key); err != nil {
		return fmt.Errorf("%s: %w", l.spec.Name, err)
	}
	args, err := l.args(1, 1, 1, 0)
	if err != nil {
		return err
	}
	if _, err := l.store.Run(ctx, l.spec.ResetScript, []string{key + l.spec.KeySuffix}, args); err != nil {
		return fmt.Errorf("%s: reset: %w", l.spec.Name, err)
	}
	return nil
}

func (l *Limiter) check(key string, limit sluice.Limit) error {
	if err := ext.ValidateKey(key); err != nil {
		return fmt.Errorf("%s: %w", l.spec.Name, err)
	}
	return l.ValidateLimit(limit)
}

// validateCost checks 0 <= n <= the algorithm's capacity.
func (l *Limiter) validateCost(limit sluice.Limit, n int64) error {
	if err := l.spec.CheckCost(limit, n); err != nil {
		return fmt.Errorf("%s: %w", l.spec.Name, err)
	}
	return nil
}

func (l *Limiter) args(rate, periodUs, burst, cost int64) ([]int64, error) {
	args := make([]int64, 4, 5)
	args[0], args[1], args[2], args[3] = rate, periodUs, burst, cost
	return l.appendNow(args)
}

// appendNow appends the client clock's time (Unix microseconds) to args
// in client-clock mode; with the server clock it returns args unchanged.
func (l *Limiter) appendNow(args []int64) ([]int64, error) {
	if l.clock == nil {
		return args, nil
	}
	t := l.clock.Now()
	now := t.UnixMicro()
	if now < 0 || now > MaxNowMicros {
		return nil, fmt.Errorf("%s: the clock reads %s, outside the years 1970 to 2100", l.spec.Name, t)
	}
	return append(args, now), nil
}

func (l *Limiter) run(ctx context.Context, key string, limit sluice.Limit, cost int64) (sluice.Decision, error) {
	args, err := l.args(limit.Rate, limit.PeriodMicros(), limit.Burst, cost)
	if err != nil {
		return sluice.Decision{}, err
	}
	reply, err := l.store.Run(ctx, l.spec.Script, []string{key + l.spec.KeySuffix}, args)
	if err != nil {
		return sluice.Decision{}, fmt.Errorf("%s: %w", l.spec.Name, err)
	}
	if l.spec.Steps != "" {
		return l.replaySingle(reply, Args{Key: key + l.spec.KeySuffix, Rate: limit.Rate, PeriodUs: limit.PeriodMicros(), Burst: limit.Burst, Cost: cost}, limit)
	}
	return l.parseReply(reply, limit)
}

// parseReply turns a decision script's reply into a Decision, checking its
// shape: allowed means no retry, denied means a positive one, and nothing
// exceeds its bounds.
func (l *Limiter) parseReply(reply []int64, limit sluice.Limit) (sluice.Decision, error) {
	if len(reply) != 4 {
		return sluice.Decision{}, fmt.Errorf("%s: %w: %d values, want 4", l.spec.Name, sluice.ErrUnexpectedReply, len(reply))
	}
	allowed, remaining, retryUs, resetUs := reply[0], reply[1], reply[2], reply[3]
	valid := (allowed == 1 && retryUs == 0 || allowed == 0 && retryUs > 0) &&
		remaining >= 0 && remaining <= max(limit.Burst, limit.Rate) &&
		retryUs <= l.spec.MaxReplyMicros && resetUs >= 0 && resetUs <= l.spec.MaxReplyMicros
	if !valid {
		return sluice.Decision{}, fmt.Errorf("%s: %w: %v", l.spec.Name, sluice.ErrUnexpectedReply, reply)
	}
	return sluice.Decision{
		Allowed:    allowed == 1,
		Limit:      limit,
		Remaining:  remaining,
		RetryAfter: time.Duration(retryUs) * time.Microsecond,
		ResetAfter: time.Duration(resetUs) * time.Microsecond,
	}, nil
}

// CheckInterval is the bucket algorithms' extra validation: Period / Rate
// rounded up to whole microseconds (their refill or emission interval)
// must be within 1% of its exact value, so that the enforced rate is never
// more than 1% below Rate. Every limit up to 10,000 per second passes, and
// any whose Period / Rate is a whole number of microseconds.
func CheckInterval(limit sluice.Limit) error {
	periodUs := limit.PeriodMicros()
	interval := (periodUs + limit.Rate - 1) / limit.Rate
	if (interval*limit.Rate-periodUs)*100 > periodUs {
		return &sluice.LimitError{Limit: limit, Reason: "period / rate must be within 1% of a whole number of microseconds " +
			"(the interval's resolution); choose a rate that divides the period, or split the key"}
	}
	return nil
}

// DeleteScript deletes KEYS[1]: the reset script of algorithms whose whole
// state is that one key. It accepts and ignores the decision arguments.
// It replies {1} if the key existed, {0} if not.
var DeleteScript = sluice.NewScript("return {redis.call('DEL', KEYS[1])}", func(tx sluice.LocalTx, keys []string, _ []int64) ([]int64, error) {
	if len(keys) != 1 || keys[0] == "" {
		return nil, ErrModelInvalidKey
	}
	_, isInt := tx.Get(keys[0])
	_, isObject := tx.Load(keys[0])
	tx.Del(keys[0])
	if isInt || isObject {
		return []int64{1}, nil
	}
	return []int64{0}, nil
})

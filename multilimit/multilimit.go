// Package multilimit checks one request against several limits in one
// round trip, all or nothing: per tenant and per route, or per second and
// per day, each with its own algorithm. If any limit denies, none is
// consumed.
//
// Each limit's state is the very one its algorithm's own Limiter keeps for
// the same key (tokenbucket.Limiter for a TokenBucket check, and so on), so
// a limit can be checked alone elsewhere and together here. All keys of one
// call must share a Redis Cluster slot: build them with sluice.Key and one
// tag (rl:{tenant:42}:...); keys that cannot share a slot are an error
// before anything is sent.
//
// The Decision says whether the request was allowed, which limit denied
// it (the first in the order given), the longest RetryAfter among the
// limits that denied (retrying then succeeds if nothing else consumed
// meanwhile), and each limit's own Decision (Remaining, RetryAfter,
// ResetAfter), which HTTP middleware can report per policy.
//
// A call of one check is that algorithm's own decision: the script its
// Limiter runs. A call of several token buckets and GCRAs (algorithms
// given as steps) runs the one-pass script (StepScript): it reads every
// key with one MGET, decides each limit by its steps written out in the
// script, writes only if all allow, and replies with the states it read,
// from which the call works out every figure on the Go twins. Any other
// call runs the two-pass script (Script), which holds every algorithm's
// decision code (the same Lua text as the algorithms' own scripts): it
// decides every limit without writing, then, only if all allow, decides
// them again and writes; the atomic script and its fixed clock make the
// second pass agree with the first.
package multilimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"

	// The algorithms register their specs (algorithm.Register) as they
	// initialise; the script below is built from them.
	_ "github.com/sluicehq/sluice/algorithms/fixedwindow"
	_ "github.com/sluicehq/sluice/algorithms/gcra"
	_ "github.com/sluicehq/sluice/algorithms/slidingcounter"
	_ "github.com/sluicehq/sluice/algorithms/slidinglog"
	_ "github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// Algorithm names the algorithm of one check.
type Algorithm string

// The algorithms a check may use; the zero value is TokenBucket.
const (
	TokenBucket    Algorithm = "tokenbucket"
	GCRA           Algorithm = "gcra"
	FixedWindow    Algorithm = "fixedwindow"
	SlidingCounter Algorithm = "slidingcounter"
	SlidingLog     Algorithm = "slidinglog"
)

// algorithms is the script's numbering: the algorithm of ARGV is its
// 1-based index here.
var algorithms = []Algorithm{TokenBucket, GCRA, FixedWindow, SlidingCounter, SlidingLog}

var (
	//go:embed args.lua
	argsSource string
	//go:embed multilimit.lua
	twoPassSource string
	//go:embed multistep.lua
	multiStepSource string
	//go:embed step_decide.lua
	stepDecideSource string
	//go:embed step_write.lua
	stepWriteSource string
)

// argsText is args.lua with algorithm.ReadArgs written in.
var argsText = replaceLine(argsSource, "-- READ_ARGS", strings.TrimSuffix(algorithm.ReadArgs(), "\n"))

var (
	specs      = registeredSpecs()
	script     = sluice.NewPackedScript(buildTwoPass(), runLocal)
	stepScript = sluice.NewPackedScript(buildMultiStep(), runStepLocal)
)

func registeredSpecs() []*algorithm.Spec {
	specs := make([]*algorithm.Spec, len(algorithms))
	for i, a := range algorithms {
		specs[i] = algorithm.Registered(string(a))
		if specs[i] == nil {
			panic("multilimit: algorithm " + string(a) + " is not registered")
		}
	}
	return specs
}

// buildTwoPass writes the two-pass script: args.lua taking every
// algorithm, its ACCEPTED line also declaring which are given as steps,
// and its DEFINE line making the function of each algorithm a call uses,
// its step function (algorithm.StepFunction) for an algorithm given as
// steps, else its body; then multilimit.lua.
func buildTwoPass() string {
	var define strings.Builder
	var accepted, stepped []string
	define.WriteString("if not bodies[id] then\n")
	for i, spec := range specs {
		id := i + 1
		accepted = append(accepted, fmt.Sprintf("[%d] = true", id))
		if i == 0 {
			fmt.Fprintf(&define, "if id == %d then\n", id)
		} else {
			fmt.Fprintf(&define, "elseif id == %d then\n", id)
		}
		if spec.Steps == "" {
			fmt.Fprintf(&define, "bodies[%d] = function(key, rate, period_us, burst, cost, now, dry)\n%s\nend\n", id, spec.Body)
			continue
		}
		fn, err := algorithm.StepFunction(spec)
		if err != nil {
			panic("multilimit: " + err.Error())
		}
		fmt.Fprintf(&define, "bodies[%d] = %s\n", id, strings.TrimRight(fn, "\n"))
		stepped = append(stepped, fmt.Sprintf("[%d] = true", id))
	}
	define.WriteString("end\nend")
	header := fmt.Sprintf("local accepted = {%s}\nlocal stepped = {%s}\nlocal bodies = {}",
		strings.Join(accepted, ", "), strings.Join(stepped, ", "))
	args := replaceLine(replaceLine(argsText, "-- ACCEPTED:", header), "-- DEFINE:", define.String())
	return algorithm.LibFor(args+twoPassSource) + args + twoPassSource
}

// buildMultiStep writes the one-pass script: args.lua taking the
// algorithms given as steps, then multistep.lua with each one's
// step_decide.lua and step_write.lua (algorithm.FillSteps) at its DECIDE
// and WRITE lines.
func buildMultiStep() string {
	// FillSteps fails only on a template with none of the step lines; a
	// template that lost one would silently drop that part.
	for _, t := range []struct{ name, text string }{
		{"step_decide.lua", stepDecideSource}, {"step_write.lua", stepWriteSource},
	} {
		lines := []string{"-- CHECK", "-- PARSE", "-- STATE", "-- KEEP", "-- STEP"}
		if t.name == "step_write.lua" {
			lines = []string{"-- WRITE"}
		}
		for _, line := range lines {
			if !strings.Contains(t.text, "\n"+line+"\n") {
				panic("multilimit: " + t.name + " has no line " + line)
			}
		}
	}
	var accepted []string
	var decide, write strings.Builder
	for i, spec := range specs {
		if spec.Steps == "" {
			continue
		}
		id := i + 1
		accepted = append(accepted, fmt.Sprintf("[%d] = true", id))
		keyword := "elseif"
		if decide.Len() == 0 {
			keyword = "if"
		}
		for _, part := range []struct {
			out      *strings.Builder
			template string
		}{{&decide, stepDecideSource}, {&write, stepWriteSource}} {
			text, err := algorithm.FillSteps(spec, "\n"+part.template)
			if err != nil {
				panic("multilimit: " + spec.Name + ": " + err.Error())
			}
			fmt.Fprintf(part.out, "%s id == %d then%s", keyword, id, text)
		}
	}
	decide.WriteString("end")
	write.WriteString("end")
	args := replaceLine(replaceLine(argsText, "-- ACCEPTED:", "local accepted = {"+strings.Join(accepted, ", ")+"}"), "-- DEFINE:", "")
	body := replaceLine(replaceLine(multiStepSource, "-- DECIDE:", decide.String()), "-- WRITE:", write.String())
	return algorithm.LibFor(args+body) + args + body
}

// replaceLine puts text in place of the line of source that starts with
// marker.
func replaceLine(source, marker, text string) string {
	at := strings.Index(source, "\n"+marker)
	if at < 0 {
		panic("multilimit: a script has no " + marker + " line")
	}
	at++
	end := at + strings.Index(source[at:], "\n")
	return source[:at] + text + source[end:]
}

// Script returns the two-pass multi-limit script, which takes every
// algorithm, paired with its Go model.
func Script() *sluice.Script { return script }

// StepScript returns the one-pass multi-limit script, which takes only
// the algorithms given as steps (the token bucket and GCRA) and replies
// with the states it read (multistep.lua), paired with its Go model. A
// call of several checks runs it when all of them are of such
// algorithms.
func StepScript() *sluice.Script { return stepScript }

const maxLimits = 16

func algorithmNames() string {
	names := make([]string, len(algorithms))
	for i, a := range algorithms {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

func specOf(a Algorithm) (int, *algorithm.Spec) {
	if a == "" {
		a = TokenBucket
	}
	for i, name := range algorithms {
		if name == a {
			return i, specs[i]
		}
	}
	return -1, nil
}

// ErrCrossSlot is returned when the keys of one call cannot share a Redis
// Cluster slot. It wraps [sluice.ErrCrossSlot].
var ErrCrossSlot = fmt.Errorf("multilimit: give the keys of one call one hash tag (sluice.Key): %w", sluice.ErrCrossSlot)

// Check is one limit of a call: the key it counts under, the limit and
// the algorithm that enforces it (default TokenBucket).
type Check struct {
	Key       string
	Limit     sluice.Limit
	Algorithm Algorithm
}

// Decision is the outcome of one multi-limit call.
type Decision struct {
	// Allowed reports whether every limit allowed the request; only then
	// was anything consumed.
	Allowed bool
	// Denied is the index (in the checks given) of the first limit that
	// denied, or -1.
	Denied int
	// RetryAfter is the longest RetryAfter of the limits that denied.
	RetryAfter time.Duration
	// Limits holds each limit's own decision, in the order given.
	Limits []sluice.Decision
}

// Limiter checks several limits at once. It is safe for concurrent use.
type Limiter struct {
	store sluice.Store
	clock sluice.Clock
	// single decides a call of one check: its algorithm's own decision
	// script, which costs Redis less than either multi-limit script.
	single []*algorithm.Limiter
}

// Option configures a [Limiter]. A nil Option is an error, as is an
// option given a bad value.
type Option func(*config) error

type config struct {
	clock sluice.Clock
}

// WithClock sends clock's time instead of letting the script read the
// server clock (client-clock mode, for tests).
func WithClock(c sluice.Clock) Option {
	return func(cfg *config) error {
		if c == nil {
			return errors.New("multilimit: WithClock(nil): omit the option to use the server clock")
		}
		cfg.clock = c
		return nil
	}
}

// New returns a Limiter on store. It does no I/O.
func New(store sluice.Store, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("multilimit: store must not be nil")
	}
	var c config
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("multilimit: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	l := &Limiter{store: store, clock: c.clock, single: make([]*algorithm.Limiter, len(specs))}
	var singleOpts []algorithm.Option
	if c.clock != nil {
		singleOpts = append(singleOpts, algorithm.WithClock(c.clock))
	}
	for i, spec := range specs {
		single, err := algorithm.New(spec, store, singleOpts...)
		if err != nil {
			return nil, fmt.Errorf("multilimit: %w", err)
		}
		l.single[i] = single
	}
	return l, nil
}

// AllowN checks a request of cost n against every check, all or nothing.
// n == 0 peeks.
func (l *Limiter) AllowN(ctx context.Context, checks []Check, n int64) (Decision, error) {
	if ctx == nil {
		return Decision{}, sluice.ErrNilContext
	}
	if len(checks) == 0 || len(checks) > maxLimits {
		return Decision{}, fmt.Errorf("multilimit: %w: 1 to %d checks, got %d", sluice.ErrInvalidLimit, maxLimits, len(checks))
	}
	keys, err := stateKeys(checks, n)
	if err != nil {
		return Decision{}, err
	}
	if len(checks) == 1 {
		return l.allowOne(ctx, checks[0], n)
	}
	args := make([]int64, 1, 2+3*len(checks))
	args[0] = n
	stepped := true // every algorithm given as steps: the one-pass script decides
	for _, c := range checks {
		id, spec := specOf(c.Algorithm)
		args = append(args, c.Limit.Rate, c.Limit.PeriodMicros(), packLimit(c.Limit.Burst, int64(id+1)))
		stepped = stepped && spec.Steps != ""
	}
	if l.clock != nil {
		t := l.clock.Now()
		now := t.UnixMicro()
		if now < 0 || now > algorithm.MaxNowMicros {
			return Decision{}, fmt.Errorf("multilimit: the clock reads %s, outside the years 1970 to 2100", t)
		}
		args = append(args, now)
	}
	var reply []int64
	if stepped {
		reply, err = l.runStepped(ctx, keys, args)
	} else {
		reply, err = l.store.Run(ctx, script, keys, args)
	}
	if err != nil {
		return Decision{}, fmt.Errorf("multilimit: %w", err)
	}
	if len(reply) != 2+3*len(checks) || reply[0] != 0 && reply[0] != 1 || reply[1] < 0 || reply[1] > int64(len(checks)) {
		return Decision{}, fmt.Errorf("multilimit: %w: %v", sluice.ErrUnexpectedReply, reply)
	}
	d := Decision{Allowed: reply[0] == 1, Denied: int(reply[1]) - 1, Limits: make([]sluice.Decision, len(checks))}
	for i, c := range checks {
		remaining, retry, reset := reply[2+3*i], reply[3+3*i], reply[4+3*i]
		_, spec := specOf(c.Algorithm)
		if remaining < 0 || remaining > max(c.Limit.Burst, c.Limit.Rate) || retry < 0 || reset < 0 ||
			retry > spec.MaxReplyMicros || reset > spec.MaxReplyMicros || d.Allowed && retry != 0 {
			return Decision{}, fmt.Errorf("multilimit: %w: %v", sluice.ErrUnexpectedReply, reply)
		}
		ld := sluice.Decision{
			Allowed:    retry == 0,
			Limit:      c.Limit,
			Remaining:  remaining,
			RetryAfter: time.Duration(retry) * time.Microsecond,
			ResetAfter: time.Duration(reset) * time.Microsecond,
		}
		d.Limits[i] = ld
		d.RetryAfter = max(d.RetryAfter, ld.RetryAfter)
	}
	return d, nil
}

// runStepped runs the one-pass script and replies as the two-pass script
// would: it decides the call again on the Go twins from the states the
// script read less its instant, at an instant of 0 (model.go's decide,
// which gives every figure), and requires each limit's allowed to be the
// script's.
func (l *Limiter) runStepped(ctx context.Context, keys []string, args []int64) ([]int64, error) {
	reply, err := l.store.Run(ctx, stepScript, keys, args)
	if err != nil {
		return nil, err
	}
	if len(reply) != len(keys) {
		return nil, fmt.Errorf("%w: %v", sluice.ErrUnexpectedReply, reply)
	}
	tx := &algorithm.StatesTx{States: make(map[string]int64, len(keys))}
	for i, key := range keys {
		if reply[i] < 0 || reply[i]>>1 > algorithm.MaxNowMicros+algorithm.MaxFillMicros {
			return nil, fmt.Errorf("%w: %v", sluice.ErrUnexpectedReply, reply)
		}
		if offset := reply[i] >> 1; offset > 0 {
			tx.States[key] = offset
		}
	}
	c, err := parseCall(tx, keys, args, steppedAlgorithm)
	var twin, allowed []int64
	if err == nil {
		for i := range c.limits {
			c.limits[i].args.Now = 0
		}
		twin, allowed, err = c.decide(tx)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the Go twin refuses what the script decided on: %v", sluice.ErrUnexpectedReply, err)
	}
	for i := range keys {
		if reply[i]&1 != allowed[i] {
			return nil, fmt.Errorf("%w: the script and its Go twin disagree on whether limit %d allows", sluice.ErrUnexpectedReply, i)
		}
	}
	return twin, nil
}

// stateKeys validates checks for a cost of n and returns their state
// keys: each valid, all in one slot, no state twice.
func stateKeys(checks []Check, n int64) ([]string, error) {
	keys := make([]string, len(checks))
	for i, c := range checks {
		_, spec := specOf(c.Algorithm)
		if err := ext.ValidateKey(c.Key); err != nil {
			return nil, fmt.Errorf("multilimit: check %d: %w", i, err)
		}
		if err := c.Algorithm.Validate(c.Limit, n); err != nil {
			return nil, fmt.Errorf("multilimit: check %d: %w", i, err)
		}
		keys[i] = c.Key + spec.KeySuffix
		if ext.HashSlot(keys[i]) != ext.HashSlot(keys[0]) {
			return nil, ErrCrossSlot
		}
		for j := range i {
			if keys[j] == keys[i] {
				return nil, fmt.Errorf("multilimit: %w: checks %d and %d are the same state (key %q, algorithm %s); "+
					"one call checks a state once", sluice.ErrInvalidKey, j, i, c.Key, spec.Name)
			}
		}
	}
	return keys, nil
}

// allowOne decides a call of one check, validated, by its algorithm's own
// decision script: all or nothing of one limit is that limit's decision,
// on the same state key.
func (l *Limiter) allowOne(ctx context.Context, c Check, n int64) (Decision, error) {
	id, _ := specOf(c.Algorithm)
	d, err := l.single[id].AllowN(ctx, c.Key, c.Limit, n)
	if err != nil {
		return Decision{}, fmt.Errorf("multilimit: %w", err)
	}
	out := Decision{Allowed: d.Allowed, Denied: -1, Limits: []sluice.Decision{d}}
	if !d.Allowed {
		out.Denied, out.RetryAfter = 0, d.RetryAfter
	}
	return out, nil
}

// Validate reports whether a check of algorithm a can enforce limit at a
// cost of n: the algorithm is known, the limit passes Limit.Validate and
// the algorithm's own checks, and 0 <= n <= what it can ever allow (Burst
// for the buckets, Rate for the windows).
func (a Algorithm) Validate(limit sluice.Limit, n int64) error {
	_, spec := specOf(a)
	if spec == nil {
		return fmt.Errorf("%w: unknown algorithm %q (%s)", sluice.ErrInvalidLimit, a, algorithmNames())
	}
	if err := spec.CheckLimit(limit); err != nil {
		return err
	}
	return spec.CheckCost(limit, n)
}

package algorithm

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

//go:embed batch_args.lua
var batchArgsSource string

// batchArgsText is batch_args.lua with read_args.lua written in.
var batchArgsText = writeIn(batchArgsSource, "READ_ARGS", readArgs)

//go:embed batch.lua
var batchSource string

//go:embed batch_step.lua
var batchStepSource string

//go:embed step_body.lua
var stepBodySource string

//go:embed state_text.lua
var stateTextSource string

// stepTemplate returns step_body.lua for the decision script (single:
// replying with one integer) or for Spec.Body (the four figures).
func stepTemplate(single bool) string {
	figures, offset, reply := "local figures = true -- the step fills in every figure of the reply", "",
		"return {allowed, remaining, retry_after, reset_after}"
	if single {
		figures = "local figures = false -- the Go twin works out remaining and reset_after"
		offset = "local offset = 0\nif state and state > now then\n  offset = state - now\nend"
		reply = "return offset * 2 + allowed"
	}
	t := strings.Replace(stepBodySource, "\n-- FIGURES\n", "\n"+figures+"\n", 1)
	t = strings.Replace(t, "\n-- OFFSET\n", "\n"+offset+"\n", 1)
	return strings.Replace(t, "\n-- RETURN\n", "\n"+reply+"\n", 1)
}

// deferLocals matches a declaration of the last of DEFER's locals
// (state_text.lua), which a template that writes DEFER in must make.
var deferLocals = regexp.MustCompile(`(?m)^\s*local [^\n]*\blast_state_text\b`)

// MaxBatch is the most requests one batch script call decides.
const MaxBatch = sluice.MaxBatch

// newBatchScript returns spec's batch script (batch.lua with spec.Body
// in place of its BODY_DIRECT and BODY_CACHED lines) paired with its Go
// twin.
func newBatchScript(spec *Spec) *sluice.Script {
	source := lib + batchArgsText + batchSource
	for _, name := range []string{"body_direct", "body_cached"} {
		source = replaceMarker(source, "-- "+strings.ToUpper(name)+":",
			"local function "+name+"(key, rate, period_us, burst, cost, now, dry)\n"+spec.Body+"\nend\n")
	}
	return sluice.NewPackedScript(source, func(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
		return runBatch(tx, keys, args, spec.Decide)
	})
}

// newStepBatchScript returns the batch script of an algorithm given as
// steps (batch_step.lua with its four parts written in), paired
// with its Go twin.
func newStepBatchScript(spec *Spec, check, state, step, expiry string) *sluice.Script {
	source := batchArgsText + fillSteps(batchStepSource, check, state, step, expiry)
	source = LibFor(source) + source
	return sluice.NewPackedScript(source, func(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
		return runStepBatch(tx, keys, args, spec.Decide)
	})
}

// splitSteps returns spec.Steps's check, state check, step and expiry,
// between its "-- state", "-- step" and "-- expiry" lines.
func splitSteps(spec *Spec) (check, state, step, expiry string) {
	parts := []string{spec.Steps}
	for _, marker := range []string{"\n-- state\n", "\n-- step\n", "\n-- expiry\n"} {
		before, after, ok := strings.Cut(parts[len(parts)-1], marker)
		if !ok || strings.Contains(after, marker) {
			panic("algorithm: " + spec.Name + "'s Steps need the lines \"-- state\", \"-- step\" and \"-- expiry\", once each and in that order")
		}
		parts = append(parts[:len(parts)-1], before, after)
	}
	return parts[0], parts[1], parts[2], parts[3]
}

// stateText returns state_text.lua's parts by name.
func stateText() map[string]string {
	parts := map[string]string{}
	for _, name := range []string{"PARSE", "KEEP", "WRITE", "DEFER", "FLUSH"} {
		at := strings.Index(stateTextSource, "\n-- "+name+":")
		if at < 0 {
			panic("algorithm: state_text.lua has no " + name + " part")
		}
		text := stateTextSource[at+1:]
		if end := strings.Index(text, "\n\n"); end >= 0 {
			text = text[:end]
		}
		parts[name] = strings.TrimRight(text, "\n")
	}
	return parts
}

// fillSteps writes state_text.lua's parts, where the template has their
// "-- PARSE", "-- KEEP", "-- WRITE", "-- DEFER" or "-- FLUSH" lines, then the four
// parts of the steps in place of its "-- CHECK", "-- STATE", "-- STEP"
// and "-- EXPIRY" lines (every one of them; EXPIRY lines come with KEEP,
// WRITE and DEFER), which it must have.
func fillSteps(template, check, state, step, expiry string) string {
	text, err := tryFillSteps(template, check, state, step, expiry, true)
	if err != nil {
		panic("algorithm: a script template " + err.Error())
	}
	return text
}

// tryFillSteps is fillSteps, returning an error for a missing line when
// every line is required (all), else only when there is none.
func tryFillSteps(template, check, state, step, expiry string, all bool) (string, error) {
	if strings.Contains(template, "\n-- DEFER\n") && !deferLocals.MatchString(template) {
		return "", fmt.Errorf("has a line \"-- DEFER\" but does not declare DEFER's locals (state_text.lua), last_state_text among them")
	}
	for name, text := range stateText() {
		template = strings.ReplaceAll(template, "\n-- "+name+"\n", "\n"+text+"\n")
	}
	found := false
	for _, r := range []struct{ marker, text string }{
		{"-- CHECK", check}, {"-- STATE", state}, {"-- STEP", step}, {"-- EXPIRY", expiry},
	} {
		if !strings.Contains(template, "\n"+r.marker+"\n") {
			if all {
				return "", fmt.Errorf("has no line %q", r.marker)
			}
			continue
		}
		found = true
		template = strings.ReplaceAll(template, "\n"+r.marker+"\n", "\n"+r.text+"\n")
	}
	if !found {
		return "", fmt.Errorf("has none of the lines \"-- CHECK\", \"-- STATE\", \"-- STEP\" and \"-- EXPIRY\"")
	}
	return template, nil
}

// replaceMarker replaces the comment paragraph that starts with marker
// (up to its blank line) with text.
func replaceMarker(source, marker, text string) string {
	at := strings.Index(source, marker)
	if at < 0 {
		panic("algorithm: batch.lua has no " + marker + " line")
	}
	end := strings.Index(source[at:], "\n\n")
	if end < 0 {
		panic("algorithm: batch.lua's " + marker + " comment has no end")
	}
	return source[:at] + text + source[at+end+1:]
}

// Batch reply error codes (batch.lua).
const (
	batchInvalidLimit = iota + 1
	batchInvalidCost
	batchCostExceedsBurst
	batchInvalidKey
	batchInvalidState
	batchOther
	batchOOM // Redis over maxmemory refused the request's first write
)

// The batch's own error replies (batch_args.lua), as its Go twin returns
// them.
var (
	errModelBatchSize   = ext.NewServerError("SLUICE_INVALID_LIMIT a batch holds 1 to 256 requests")
	errModelBatchShapes = ext.NewServerError("SLUICE_INVALID_LIMIT a batch holds 1 to m shapes")
	errModelBatchKeys   = ext.NewServerError("SLUICE_INVALID_KEY a batch names 1 to m keys")
	errModelBatchDupKey = ext.NewServerError("SLUICE_INVALID_KEY a batch names each key once")
	errModelBatchArgs   = ext.NewServerError("SLUICE_INVALID_LIMIT 1 + 4 x shapes + requests arguments expected")
	errModelBatchRef    = ext.NewServerError("SLUICE_INVALID_KEY a request names no key or shape")
)

// batchArgs are a batch's arguments (batch_args.lua): its distinct keys
// and shapes, and each request's key and shape.
type batchArgs struct {
	keys   []string
	shapes [][4]int64 // rate, period_us, burst, cost
	reqs   [][2]int   // key index, shape index
}

// encodeBatch returns the keys and arguments of a batch of the requests
// on the given state keys: each key and shape once, then one reference per
// request; keyOf is each request's index in the distinct keys.
func encodeBatch(keys []string, shapes [][4]int64) (distinct []string, args []int64, keyOf []int) {
	distinct = make([]string, 0, len(keys))
	keyIndex := make(map[string]int, len(keys))
	shapeIndex := make(map[[4]int64]int, 1)
	var shapeArgs []int64
	refs := make([]int64, len(keys))
	keyOf = make([]int, len(keys))
	for i, key := range keys {
		k, ok := keyIndex[key]
		if !ok {
			k = len(distinct)
			keyIndex[key] = k
			distinct = append(distinct, key)
		}
		keyOf[i] = k
		sh, ok := shapeIndex[shapes[i]]
		if !ok {
			sh = len(shapeIndex)
			shapeIndex[shapes[i]] = sh
			shapeArgs = append(shapeArgs, shapes[i][:]...)
		}
		refs[i] = int64(k)*256 + int64(sh)
	}
	if implicitRefs(len(keys), len(shapeIndex), len(distinct)) {
		refs = nil
	}
	args = make([]int64, 0, 2+len(shapeArgs)+len(refs))
	args = append(args, int64(len(keys))*512+int64(len(shapeIndex)))
	args = append(append(args, shapeArgs...), refs...)
	return distinct, args, keyOf
}

// implicitRefs says whether a batch of m requests, s shapes and k keys
// leaves its references out (batch_args.lua): one shape, and one key or
// one key per request.
func implicitRefs(m, s, k int) bool { return s == 1 && (k == 1 || k == m) }

// parseBatchArgs is batch_args.lua's Go twin: the same checks, in the same
// order, with tx's clock standing in for TIME.
func parseBatchArgs(tx sluice.LocalTx, keys []string, args []int64) (batchArgs, int64, error) {
	if len(args) < 1 || args[0] < 0 || args[0]/512 < 1 || args[0]/512 > MaxBatch {
		return batchArgs{}, 0, errModelBatchSize
	}
	m, s := int(args[0]/512), int(args[0]%512)
	if s < 1 || s > m {
		return batchArgs{}, 0, errModelBatchShapes
	}
	if len(keys) < 1 || len(keys) > m {
		return batchArgs{}, 0, errModelBatchKeys
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return batchArgs{}, 0, errModelBatchDupKey
		}
		seen[k] = true
	}
	refs := 1 + 4*s
	implicit := implicitRefs(m, s, len(keys))
	nrefs := m
	if implicit {
		nrefs = 0
	}
	if len(args) != refs+nrefs && len(args) != refs+nrefs+1 {
		return batchArgs{}, 0, errModelBatchArgs
	}
	now := tx.NowMicros()
	if len(args) == refs+nrefs+1 {
		now = args[refs+nrefs]
		if now < 0 || now > MaxNowMicros {
			return batchArgs{}, 0, ErrModelInvalidNow
		}
	}
	b := batchArgs{keys: keys, reqs: make([][2]int, m)}
	for i := range m {
		if implicit {
			if len(keys) > 1 {
				b.reqs[i][0] = i
			}
			continue
		}
		r := args[refs+i]
		if r < 0 || r/256 >= int64(len(keys)) || r%256 >= int64(s) {
			return batchArgs{}, 0, errModelBatchRef
		}
		b.reqs[i] = [2]int{int(r / 256), int(r % 256)}
	}
	for j := range s {
		b.shapes = append(b.shapes, [4]int64(args[1+4*j:5+4*j]))
	}
	return b, now, nil
}

// runBatch is the batch scripts' Go twin (batch_args.lua with batch.lua
// or batch_step.lua): each request decided as the algorithm's own script
// decides it.
func runBatch(tx sluice.LocalTx, keys []string, args []int64, decide DecideFunc) ([]int64, error) {
	b, now, err := parseBatchArgs(tx, keys, args)
	if err != nil {
		return nil, err
	}
	reply := make([]int64, 0, 2*len(b.reqs))
	for _, ref := range b.reqs {
		r, err := decideRequest(tx, b.keys[ref[0]], b.shapes[ref[1]], now, decide)
		if err != nil {
			reply = append(reply, -batchErrorCode(err))
			continue
		}
		reply = appendCompact(reply, r)
	}
	return reply, nil
}

// decideRequest decides one request of a batch as the batch scripts do:
// its key and shape checked, then the algorithm's twin.
func decideRequest(tx sluice.LocalTx, key string, shape [4]int64, now int64, decide DecideFunc) ([]int64, error) {
	if key == "" {
		return nil, ErrModelInvalidKey
	}
	a := Args{Key: key, Rate: shape[0], PeriodUs: shape[1], Burst: shape[2], Cost: shape[3], Now: now}
	if err := a.checkLimitAndCost(); err != nil {
		return nil, err
	}
	return decide(tx, a, false)
}

// appendCompact appends a decision reply {allowed, remaining,
// retry_after_us, reset_after_us} in a batch's compact form
// (batch_args.lua).
func appendCompact(reply, r []int64) []int64 {
	if r[2] != 0 {
		return append(reply, r[1]*4+2+r[0], r[3], r[2])
	}
	return append(reply, r[1]*4+r[0], r[3])
}

// decodeBatch splits a batch's compact reply into m decision replies of
// four values, or (for a rejected request) the code it failed with.
func decodeBatch(reply []int64, m int) ([][4]int64, []int64, error) {
	out, codes := make([][4]int64, m), make([]int64, m)
	at := 0
	for i := range m {
		if at >= len(reply) {
			return nil, nil, fmt.Errorf("%w: %d values for %d requests", sluice.ErrUnexpectedReply, len(reply), m)
		}
		head := reply[at]
		if head < 0 {
			codes[i] = -head
			at++
			continue
		}
		n := 2
		if head&2 != 0 {
			n = 3
		}
		if at+n > len(reply) {
			return nil, nil, fmt.Errorf("%w: %d values for %d requests", sluice.ErrUnexpectedReply, len(reply), m)
		}
		out[i] = [4]int64{head & 1, head >> 2, 0, reply[at+1]}
		if n == 3 {
			out[i][2] = reply[at+2]
		}
		at += n
	}
	if at != len(reply) {
		return nil, nil, fmt.Errorf("%w: %d values for %d requests", sluice.ErrUnexpectedReply, len(reply), m)
	}
	return out, codes, nil
}

// batchCodes pairs each batch error code with the server error code it
// stands for (batch.lua's ERROR_CODES), for both directions of the mapping.
var batchCodes = []struct {
	code   int64
	server string
}{
	{batchInvalidLimit, ext.CodeInvalidLimit}, {batchInvalidCost, ext.CodeInvalidCost},
	{batchCostExceedsBurst, ext.CodeCostExceedsBurst}, {batchInvalidKey, ext.CodeInvalidKey},
	{batchInvalidState, ext.CodeInvalidState}, {batchInvalidState, "WRONGTYPE"},
	{batchOOM, "OOM"},
}

// batchErrorCode is batch.lua's error_code: the batch code of a twin's
// error, by its server code.
func batchErrorCode(err error) int64 {
	code := ext.ServerCode(err)
	for _, c := range batchCodes {
		if c.server == code {
			return c.code
		}
	}
	return batchOther
}

// batchError turns a batch reply's error code into the error AllowN would
// have returned for the request.
func (l *Limiter) batchError(code int64) error {
	if code == batchOOM {
		return fmt.Errorf("%s: %w", l.spec.Name, &ext.ServerError{Code: "OOM",
			Message: "command not allowed when used memory > 'maxmemory' (the request's first write, in a batch)"})
	}
	for _, c := range batchCodes {
		if c.code == code {
			return fmt.Errorf("%s: %w", l.spec.Name, &ext.ServerError{Code: c.server, Message: "the script rejected the request"})
		}
	}
	return fmt.Errorf("%s: %w: batch error code %d", l.spec.Name, sluice.ErrUnexpectedReply, code)
}

// AllowBatch decides reqs in one script call: each as AllowN would, in
// order, at one instant. Every request is validated first; an invalid one
// fails the whole call before anything is sent. On Redis Cluster all the
// keys must share a slot (sluice.Key with one tag); the caller groups them.
func (l *Limiter) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	if len(reqs) == 0 || len(reqs) > MaxBatch {
		return nil, fmt.Errorf("%s: %w: a batch holds 1 to %d requests, got %d", l.spec.Name, sluice.ErrInvalidCost, MaxBatch, len(reqs))
	}
	keys := make([]string, len(reqs))
	shapes := make([][4]int64, len(reqs))
	for i, r := range reqs {
		if err := l.check(r.Key, r.Limit); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: err}
		}
		if err := l.validateCost(r.Limit, r.N); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: err}
		}
		keys[i] = r.Key + l.spec.KeySuffix
		shapes[i] = [4]int64{r.Limit.Rate, r.Limit.PeriodMicros(), r.Limit.Burst, r.N}
	}
	distinct, args, keyOf := encodeBatch(keys, shapes)
	args, err := l.appendNow(args)
	if err != nil {
		return nil, err
	}
	reply, err := l.store.Run(ctx, l.spec.BatchScript, distinct, args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.spec.Name, err)
	}
	if l.spec.Steps != "" {
		results, err := l.replayBatch(reqs, distinct, keyOf, reply)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.spec.Name, err)
		}
		return results, nil
	}
	decisions, codes, err := decodeBatch(reply, len(reqs))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.spec.Name, err)
	}
	results := make([]sluice.Result, len(reqs))
	for i, r := range reqs {
		if codes[i] != 0 {
			results[i].Err = fmt.Errorf("request %d: %w", i, l.batchError(codes[i]))
			continue
		}
		results[i].Decision, results[i].Err = l.parseReply(decisions[i][:], r.Limit)
	}
	return results, nil
}

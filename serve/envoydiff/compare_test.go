//go:build unix

package envoydiff_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// via is how a request is sent: over gRPC or as POST /json.
type via int

const (
	overGRPC via = iota
	overJSON
)

func (v via) String() string { return [...]string{"gRPC", "POST /json"}[v] }

// reply is what one service answered to one request.
type reply struct {
	// code is the gRPC status code of the call (over gRPC), or the HTTP
	// status (over POST /json).
	code int
	// resp is the decoded response, nil when the call failed.
	resp *rlsv3.RateLimitResponse
	// body is the error message or the body of a failed HTTP call.
	body string
}

// send sends req to s over v, with a 10 s deadline.
func (s *service) send(t *testing.T, v via, req *rlsv3.RateLimitRequest) reply {
	t.Helper()
	if v == overGRPC {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := s.rls.ShouldRateLimit(ctx, req)
		st, _ := status.FromError(err)
		return reply{code: int(st.Code()), resp: resp, body: st.Message()}
	}
	body, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return s.postJSON(t, string(body))
}

// postJSON sends body as POST /json.
func (s *service) postJSON(t *testing.T, body string) reply {
	t.Helper()
	code, text, err := httpDo(http.MethodPost, "http://"+s.httpAddr+"/json", body)
	if err != nil {
		t.Fatalf("%s: POST /json: %v", s.name, err)
	}
	r := reply{code: code, body: text}
	var resp rlsv3.RateLimitResponse
	if code == http.StatusOK || code == http.StatusTooManyRequests {
		if err := protojson.Unmarshal([]byte(text), &resp); err != nil {
			t.Fatalf("%s: POST /json answered %d with a body that is not a RateLimitResponse: %v\n%s", s.name, code, err, text)
		}
		r.resp = &resp
	}
	return r
}

// same sends req to both services over v, fails t unless their answers
// are the same in every field, and returns theirs.
func (p *pair) same(t *testing.T, v via, req *rlsv3.RateLimitRequest) reply {
	t.Helper()
	theirs := p.theirs.send(t, v, req)
	ours := p.ours.send(t, v, req)
	requireSameReply(t, fmt.Sprintf("%v %v", v, req), theirs, ours)
	return theirs
}

// resetSlack is how far apart the two services' duration_until_reset (and
// the reset header) may be: the seconds that pass between the two calls
// (each is rounded to whole seconds).
const resetSlack = 2

// requireSameReply fails t unless a and b agree in every field: the call's
// code, the overall code, every status (code, current_limit,
// limit_remaining, duration_until_reset within resetSlack), the headers
// and the rest of the message.
func requireSameReply(t *testing.T, what string, theirs, ours reply) {
	t.Helper()
	if theirs.code != ours.code {
		t.Fatalf("%s:\ntheirs answered code %d (%s)\nours answered code %d (%s)", what, theirs.code, theirs.body, ours.code, ours.body)
	}
	if (theirs.resp == nil) != (ours.resp == nil) {
		t.Fatalf("%s:\ntheirs: %v\nours: %v", what, theirs.resp, ours.resp)
	}
	if theirs.resp == nil {
		if theirs.body != ours.body {
			t.Fatalf("%s: both failed with code %d, saying\ntheirs: %q\nours:   %q", what, theirs.code, theirs.body, ours.body)
		}
		return
	}
	a, b := proto.Clone(theirs.resp).(*rlsv3.RateLimitResponse), proto.Clone(ours.resp).(*rlsv3.RateLimitResponse)
	if len(a.GetStatuses()) == len(b.GetStatuses()) {
		for i := range a.GetStatuses() {
			da, db := a.Statuses[i].GetDurationUntilReset(), b.Statuses[i].GetDurationUntilReset()
			if (da == nil) != (db == nil) {
				continue // the diff below shows it
			}
			if da != nil && abs(da.AsDuration()-db.AsDuration()) <= resetSlack*time.Second {
				b.Statuses[i].DurationUntilReset = a.Statuses[i].DurationUntilReset
			}
		}
	}
	if len(a.GetResponseHeadersToAdd()) == len(b.GetResponseHeadersToAdd()) {
		for i, h := range a.GetResponseHeadersToAdd() {
			hb := b.ResponseHeadersToAdd[i]
			if h.GetKey() == hb.GetKey() && strings.Contains(strings.ToLower(h.GetKey()), "reset") {
				x, errA := strconv.Atoi(h.GetValue())
				y, errB := strconv.Atoi(hb.GetValue())
				if errA == nil && errB == nil && x-y <= resetSlack && y-x <= resetSlack {
					hb.Value = h.GetValue()
				}
			}
		}
	}
	if diff := cmp.Diff(a, b, protocmp.Transform()); diff != "" {
		t.Fatalf("%s: the answers differ (-theirs +ours):\n%s", what, diff)
	}
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// hitsAddend is a request's hits_addend, for [buildRequest].
type hitsAddend uint32

// buildRequest builds a request of domain from parts: descriptors and at
// most one hitsAddend.
func buildRequest(domain string, parts ...any) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain}
	for _, part := range parts {
		switch x := part.(type) {
		case *ratelimitv3.RateLimitDescriptor:
			req.Descriptors = append(req.Descriptors, x)
		case hitsAddend:
			req.HitsAddend = uint32(x)
		default:
			panic(fmt.Sprintf("buildRequest: a %T", part))
		}
	}
	return req
}

// desc builds a descriptor of key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// withHits sets the descriptor's hits_addend.
func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// withLimit sets the descriptor's limit override.
func withLimit(d *ratelimitv3.RateLimitDescriptor, n uint32, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: unit}
	return d
}

// codesOf returns the overall code and each status's code and remaining,
// for short expectations: "OVER_LIMIT [OK 2, OVER_LIMIT 0]".
func codesOf(r reply) string {
	if r.resp == nil {
		return fmt.Sprintf("code %d: %s", r.code, r.body)
	}
	var parts []string
	for _, s := range r.resp.GetStatuses() {
		parts = append(parts, fmt.Sprintf("%s %d", s.GetCode(), s.GetLimitRemaining()))
	}
	return fmt.Sprintf("%s [%s]", r.resp.GetOverallCode(), strings.Join(parts, ", "))
}

// requireCodes fails t unless theirs answered want (see [codesOf]).
func requireCodes(t *testing.T, r reply, want string) {
	t.Helper()
	if got := codesOf(r); got != want {
		t.Fatalf("theirs answered %s, the case expects %s\n%v", got, want, r.resp)
	}
}

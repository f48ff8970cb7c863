package tokenbucket_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	_ "github.com/sluicehq/sluice/algorithms/fixedwindow" // registers the spec looked up below
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// TestBatchWireAgreesOnEveryStore: raw calls of the batch scripts (the
// token bucket's, built from its steps, and the fixed window's, built
// around its body), well-formed or not, get the same reply or the same
// error code from Redis, the embedded store and the Go twin (memstore),
// their numbers packed or one per argument:
// each key and shape once, one reference per request, and the call
// refused before anything is decided when a reference, the counts or a
// key list are wrong.
func TestBatchWireAgreesOnEveryStore(t *testing.T) {
	server := redistest.SharedRedis(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	onRedis, err := goredisstore.New(client)
	require.NoError(t, err)
	emb, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = emb.Close() })
	onEmbedded := redis.NewClient(&redis.Options{Addr: emb.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = onEmbedded.Close() })
	// Sluice's stores pack the numbers; a store that sends them one per
	// argument, in hex (a negative one in decimal), is read alike.
	stores := map[string]sluice.Store{"redis": onRedis, "embedded": emb, "memstore": newMemStore(t),
		"redis, one per argument": redistest.HexStore(client), "embedded, one per argument": redistest.HexStore(onEmbedded)}

	const now = 1_700_000_000_000_000
	ok := []int64{10, 1_000_000, 10} // 10 a second, burst 10
	type call struct {
		name string
		keys []string
		args []int64
		want []int64 // nil: an error, with wantCode
		code string
	}
	shape := func(cost int64) []int64 { return append(append([]int64{}, ok...), cost) }
	// args joins its parts into one argument list.
	args := func(parts ...any) []int64 {
		var out []int64
		for _, p := range parts {
			switch p := p.(type) {
			case int:
				out = append(out, int64(p))
			case int64:
				out = append(out, p)
			case []int64:
				out = append(out, p...)
			}
		}
		return out
	}
	two := func(refs ...any) []int64 { return args(2*512+2, shape(1), shape(2), args(refs...)) } // two shapes: references given
	var alternating []any                                                                        // 60 requests over two keys and two shapes
	for i := range 60 {
		alternating = append(alternating, (i%2)*256+(i/2)%2)
	}
	calls := []call{
		{"120 requests on one key", []string{"a"}, args(120*512+1, shape(1), now), nil, ""},
		{"60 requests on two keys and two shapes", []string{"a", "b"}, args(60*512+2, shape(1), shape(2), args(alternating...), now), nil, ""},
		{"hot key", []string{"a"}, args(3*512+1, shape(4), now), nil, ""},
		{"one key each", []string{"a", "b"}, args(2*512+1, shape(3), now), nil, ""},
		{"two keys two shapes", []string{"a", "b"}, args(3*512+2, shape(1), shape(20), 0, 257, 1, now), nil, ""},
		{"a bad shape fails its requests only", []string{"a"}, args(2*512+2, 0, 1_000_000, 10, 1, shape(1), 0, 1, now), nil, ""},
		{"a refund", []string{"a"}, args(1*512+1, shape(-2), now), nil, ""},
		{"an empty key fails its request", []string{""}, args(1*512+1, shape(1), now), nil, ""},
		{"no requests", []string{"a"}, args(0*512 + 1), nil, ext.CodeInvalidLimit},
		{"no shapes", []string{"a"}, args(1*512+0, now), nil, ext.CodeInvalidLimit},
		{"a negative header", []string{"a"}, args(-(1*512 + 1), shape(1), now), nil, ext.CodeInvalidLimit},
		{"more shapes than requests", []string{"a"}, args(1*512+2, shape(1), shape(1)), nil, ext.CodeInvalidLimit},
		{"more keys than requests", []string{"a", "b"}, args(1*512+1, shape(1), now), nil, ext.CodeInvalidKey},
		{"a key twice", []string{"a", "a"}, args(2*512+1, shape(1), now), nil, ext.CodeInvalidKey},
		{"references where they are left out", []string{"a"}, args(2*512+1, shape(1), 0, 0, now), nil, ext.CodeInvalidLimit},
		{"a missing reference", []string{"a"}, two(0), nil, ext.CodeInvalidLimit},
		{"a reference past the keys", []string{"a"}, two(0, 256, now), nil, ext.CodeInvalidKey},
		{"a reference past the shapes", []string{"a"}, two(0, 2, now), nil, ext.CodeInvalidKey},
		{"a negative reference", []string{"a"}, two(0, -1, now), nil, ext.CodeInvalidKey},
		{"now out of range", []string{"a"}, args(1*512+1, shape(1), -5), nil, ext.CodeInvalidLimit},
	}
	// Worked by hand for the token bucket, whose batch replies with the
	// instant, each key's state (-1: none) and the allowed bits: an
	// interval of 100 ms, so a tolerance of 1 s, and cost 4 three times
	// is allowed twice (bits 0b011); an invalid shape's request is not
	// allowed, the next is (0b10).
	wantTokenBucket := map[string][]int64{
		"hot key":                             {now, -1, 0b011},
		"120 requests on one key":             {now, -1, 1<<10 - 1, 0, 0}, // three words of 50 bits
		"a bad shape fails its requests only": {now, -1, 0b10},
		"one key each":                        {now, -1, -1, 0b11},
		"an empty key fails its request":      {now, -1, 0},
	}
	for _, alg := range []string{"tokenbucket", "fixedwindow"} {
		spec := algorithm.Registered(alg)
		for _, c := range calls {
			t.Run(alg+"/"+c.name, func(t *testing.T) {
				var first []int64
				for _, name := range []string{"redis", "embedded", "memstore", "redis, one per argument", "embedded, one per argument"} {
					tag := sluice.Key(sluicetest.UniqueKey(t))
					keys := make([]string, len(c.keys))
					for i, k := range c.keys {
						if k != "" {
							keys[i] = tag + ":" + k
						}
					}
					reply, err := stores[name].Run(context.Background(), spec.BatchScript, keys, c.args)
					if c.code != "" {
						require.Error(t, err, name)
						require.Equal(t, c.code, ext.ServerCode(err), "%s: %v", name, err)
						continue
					}
					require.NoError(t, err, name)
					if want, ok := wantTokenBucket[c.name]; ok && alg == "tokenbucket" {
						require.Equal(t, want, reply, name)
					}
					if first == nil {
						first = reply
						continue
					}
					require.Equal(t, first, reply, "%s decides as redis does", name)
				}
			})
		}
	}
}

// TestBatchRefusesPackedNumbersOfAWrongSize: a batch script's one packed
// argument (sluice.Script.Args) must hold whole numbers of 7 bytes (any
// other length is one number, too few arguments), on Redis
// (struct.unpack) and the embedded store (string.byte) alike, and junk
// packed in whole numbers is refused by the checks that follow.
func TestBatchRefusesPackedNumbersOfAWrongSize(t *testing.T) {
	for server, c := range scriptServers(t) {
		for _, alg := range []string{"tokenbucket", "fixedwindow"} {
			script := algorithm.Registered(alg).BatchScript
			for _, size := range []int{0, 6, 7, 8, 34, 35, 36} {
				err := c.Eval(t.Context(), script.Source(), []string{"{w}:" + alg}, strings.Repeat("\x01", size)).Err()
				require.ErrorContains(t, err, "SLUICE_INVALID_LIMIT", "%s/%s: %d bytes", server, alg, size)
			}
		}
	}
}

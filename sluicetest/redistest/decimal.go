package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// DecimalStore runs scripts on c as a store unaware of
// sluice.NewHexScript does: every argument in decimal, each call an EVAL
// of the script's source. Tests compare it with Sluice's stores, which
// send Script.Args (packed or hex).
func DecimalStore(c *redis.Client) sluice.Store {
	return argStore{c, func(_ *sluice.Script, v int64) string { return strconv.FormatInt(v, 10) }}
}

// HexStore is DecimalStore sending each argument as Script.Arg writes it
// (hex for a script of sluice.NewHexScript or NewPackedScript), one per
// number, as a store written before Script.Args does.
func HexStore(c *redis.Client) sluice.Store {
	return argStore{c, (*sluice.Script).Arg}
}

type argStore struct {
	c      *redis.Client
	encode func(*sluice.Script, int64) string
}

func (s argStore) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	argv := make([]any, len(args))
	for i, a := range args {
		argv[i] = s.encode(script, a)
	}
	res, err := s.c.Eval(ctx, script.Source(), keys, argv...).Result()
	var rerr redis.Error
	if errors.As(err, &rerr) && !errors.Is(err, redis.Nil) {
		return nil, ext.NewServerError(rerr.Error())
	}
	if err != nil {
		return nil, err
	}
	if n, ok := res.(int64); ok {
		return []int64{n}, nil // an integer reply: one value (sluice.Store)
	}
	values, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %v", sluice.ErrUnexpectedReply, res)
	}
	out := make([]int64, len(values))
	for i, v := range values {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: %v", sluice.ErrUnexpectedReply, res)
		}
		out[i] = n
	}
	return out, nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext/algorithm"
)

// bodyCase measures a Lua file as a decision script's body after
// Sluice's prelude, assembled as algorithm.NewScript assembles one, for trying a change to an
// algorithm before making it (bench/runs/scratch): each call sends the
// numbers of args (comma-separated) packed as Sluice's stores send them
// (sluice.Script.Args), on one key, or on a new key each call when fresh.
func bodyCase(path, args string, fresh bool) (testCase, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return testCase{}, err
	}
	// As algorithm.NewScript assembles a script: the prelude, the body,
	// and what they need of lib.lua before them.
	prelude := strings.TrimPrefix(algorithm.Prelude(), algorithm.Lib())
	src := algorithm.LibFor(prelude+string(body)) + prelude + string(body)
	var nums []int64
	for _, f := range strings.Split(args, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 0, 64)
		if err != nil {
			return testCase{}, fmt.Errorf("-args %q: %w", args, err)
		}
		nums = append(nums, v)
	}
	wire := sluice.NewPackedScript(src, nil).Args(nums)
	argv := make([]any, len(wire))
	for i, a := range wire {
		argv[i] = a
	}
	name := "body " + filepath.Base(path)
	if fresh {
		name += ", a new key every call"
	}
	return testCase{name: name, perCall: 1, setup: func(_ context.Context, c *redis.Client) (call, error) {
		s := redis.NewScript(src)
		next := 0
		return func(ctx context.Context) error {
			key := "{t1}:script"
			if fresh {
				key = fmt.Sprintf("{t1}:script:%d", next)
				next++
			}
			err := s.Run(ctx, c, []string{key}, argv...).Err()
			if errors.Is(err, redis.Nil) {
				return nil
			}
			return err
		}, nil
	}}, nil
}

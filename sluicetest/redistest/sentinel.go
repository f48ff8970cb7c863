package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the name under which [StartSentinelGroup]'s sentinels
// monitor the primary.
const SentinelMaster = "sluice"

// SentinelDownAfter is the sentinels' down-after-milliseconds: a primary
// that does not answer for this long is failed over.
const SentinelDownAfter = 500 * time.Millisecond

// SentinelFailoverTimeout is the sentinels' failover-timeout. A failover
// attempt whose leader is not elected within it (the sentinels split
// their votes: each votes once per epoch, for the first sentinel that
// asks), or whose promotion is not seen within it, is abandoned, and
// neither its leader nor the sentinels that voted for it try again before
// twice this, plus up to a second, after it started.
const SentinelFailoverTimeout = 5 * time.Second

// Sentinel's own timers (Redis's sentinel.c), which a failover's pace
// follows.
const (
	// sentinelMaxDesync is the most a sentinel adds, at random, to a
	// failover attempt's start so that the sentinels' attempts spread.
	sentinelMaxDesync = time.Second
	// sentinelTiltPeriod is how long a sentinel in TILT mode takes no
	// action: it enters TILT when its 100 ms timer runs 2 s late, as it
	// may on a loaded machine.
	sentinelTiltPeriod = 30 * time.Second
	// sentinelFailoverAttempts is how many failover attempts
	// [SentinelGroup.AwaitFailover] waits for.
	sentinelFailoverAttempts = 4
)

// SentinelGroup is a throwaway primary with one replica, watched by three
// sentinels (redis-server --sentinel), all on loopback.
type SentinelGroup struct {
	Primary, Replica *RedisServer
	Sentinels        []*RedisServer
}

// StartSentinelGroup starts a primary and its replica, both with
// serverArgs (such as "--min-replicas-to-write", "1"), and three sentinels
// with a quorum of 2. It returns once the replica's link is up and every
// sentinel knows the replica and the other sentinels. Cleanup stops every
// process.
func StartSentinelGroup(tb testing.TB, serverArgs ...string) *SentinelGroup {
	tb.Helper()
	path := RequireRedisServer(tb)
	g := &SentinelGroup{}
	tb.Cleanup(func() {
		for _, s := range append(g.Sentinels, g.Primary, g.Replica) {
			if s != nil {
				s.Stop()
			}
		}
	})
	var err error
	if g.Primary, err = startRedis(path, tb.TempDir(), serverArgs); err != nil {
		tb.Fatalf("start primary: %v", err)
	}
	replicaArgs := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(g.Primary.port)}, serverArgs...)
	if g.Replica, err = startRedis(path, tb.TempDir(), replicaArgs); err != nil {
		tb.Fatalf("start replica: %v", err)
	}
	if err := waitForReplicaLink(g.Replica); err != nil {
		tb.Fatalf("replica: %v", err)
	}
	for range 3 {
		s, err := startSentinel(path, tb.TempDir(), g.Primary)
		if err != nil {
			tb.Fatalf("start sentinel: %v", err)
		}
		g.Sentinels = append(g.Sentinels, s)
	}
	for _, s := range g.Sentinels {
		if err := waitFor(func() error {
			info, err := s.Do("INFO", "sentinel")
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
			}
			master := fields(info, "master0")["master0"]
			if !strings.Contains(master, "slaves=1,sentinels=3") {
				return fmt.Errorf("sentinel %s (to know 1 replica and 3 sentinels): %s", s.Addr(), master)
			}
			return nil
		}); err != nil {
			tb.Fatalf("sentinels: %v", err)
		}
	}
	return g
}

// StartReplica starts a replica of primary with serverArgs and returns
// once its link is up. Cleanup stops it.
func StartReplica(tb testing.TB, primary *RedisServer, serverArgs ...string) *RedisServer {
	tb.Helper()
	path := RequireRedisServer(tb)
	args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.port)}, serverArgs...)
	replica, err := startRedis(path, tb.TempDir(), args)
	if err != nil {
		tb.Fatalf("start replica: %v", err)
	}
	tb.Cleanup(replica.Stop)
	if err := waitForReplicaLink(replica); err != nil {
		tb.Fatalf("replica: %v", err)
	}
	return replica
}

// startSentinel starts a sentinel monitoring primary, with a configuration
// file of its own in dir (sentinels rewrite it).
func startSentinel(path, dir string, primary *RedisServer) (*RedisServer, error) {
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
		"sentinel down-after-milliseconds %[1]s %[3]d\n"+
		"sentinel failover-timeout %[1]s %[4]d\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		SentinelMaster, primary.port, SentinelDownAfter/time.Millisecond, SentinelFailoverTimeout/time.Millisecond)
	var lastErr error
	for range 5 {
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, err
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &RedisServer{path: path, port: port, dir: dir, conf: conf, args: []string{"--sentinel"}}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// SentinelAddrs returns the sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Announced reports whether every sentinel names replica as the primary
// (the address clients are told to use, in INFO sentinel). A client learns
// of a failover from one sentinel, and the sentinels learn of it from each
// other a moment apart, so a client has surely been told once all of them
// agree. That follows the replica's promotion by up to a second or two:
// the sentinels poll INFO once a second during a failover.
func (g *SentinelGroup) Announced(replica *RedisServer) bool {
	for _, s := range g.Sentinels {
		info, err := s.Do("INFO", "sentinel")
		if err != nil || !strings.Contains(info, "address="+replica.Addr()+",") {
			return false
		}
	}
	return true
}

// AwaitFailover waits, once the primary is dead, until every sentinel
// names replica as the primary ([SentinelGroup.Announced]). It waits for
// as long as the sentinels show a failover under way or to come, with a
// patience taken from Sentinel's timers, not from the machine's speed,
// and returns an error that says what each sentinel showed last when:
//
//   - for SentinelDownAfter + 10 s, no sentinel has shown a sign of a
//     failover (the primary subjectively or objectively down, a failover
//     in progress, the replica named, TILT mode): none is happening;
//   - what the sentinels show has not changed for 2 x
//     SentinelFailoverTimeout + 1 s + 5 s (an attempt that failed is
//     followed by another within 2 x failover-timeout + 1 s of its start),
//     or for 30 s + 5 s while one is in TILT mode: the failover is stuck;
//   - or the failover has not ended after SentinelDownAfter + 30 s (one
//     TILT) + 4 attempts: it keeps failing.
func (g *SentinelGroup) AwaitFailover(replica *RedisServer) error {
	const margin = 5 * time.Second
	attempt := 2*SentinelFailoverTimeout + sentinelMaxDesync
	idle := SentinelDownAfter + 10*time.Second
	limit := SentinelDownAfter + sentinelTiltPeriod + sentinelFailoverAttempts*attempt
	start := time.Now()
	var (
		lastLook             time.Time
		seen                 []sentinelView
		changed, busy        = start, start
		tilt                 bool
		lastSeen, lastChange string
	)
	for !g.Announced(replica) {
		now := time.Now()
		if now.Sub(lastLook) >= 100*time.Millisecond {
			lastLook = now
			seen = seen[:0]
			anyBusy := false
			tilt = false
			for _, s := range g.Sentinels {
				v := viewSentinel(s)
				seen = append(seen, v)
				anyBusy = anyBusy || v.busy(replica)
				tilt = tilt || v.tilt
			}
			if anyBusy {
				busy = now
			}
			if text := fmt.Sprint(seen); text != lastChange {
				lastChange, changed = text, now
			}
			lastSeen = describeViews(seen)
		}
		quiet := attempt + margin
		if tilt {
			quiet = sentinelTiltPeriod + margin
		}
		switch elapsed := now.Sub(start); {
		case now.Sub(busy) > idle:
			return fmt.Errorf("no sentinel has shown a failover for %s (after %s in all): %s",
				now.Sub(busy).Round(time.Millisecond), elapsed.Round(time.Millisecond), lastSeen)
		case now.Sub(changed) > quiet:
			return fmt.Errorf("the failover is stuck: the sentinels have shown the same for %s (after %s in all): %s",
				now.Sub(changed).Round(time.Millisecond), elapsed.Round(time.Millisecond), lastSeen)
		case elapsed > limit:
			return fmt.Errorf("the failover has not ended after %s, %d attempts' time: %s",
				elapsed.Round(time.Millisecond), sentinelFailoverAttempts, lastSeen)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// sentinelView is what one sentinel shows of the group's primary.
type sentinelView struct {
	sentinel string
	// names is the address it names as the primary; flags are its flags
	// for it (master, s_down, o_down, failover_in_progress...), state the
	// failover's state while one is in progress, epoch its configuration
	// epoch.
	names, flags, state, epoch string
	tilt                       bool
	err                        string
}

func viewSentinel(s *RedisServer) sentinelView {
	v := sentinelView{sentinel: s.Addr()}
	addr, err := s.DoStrings("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
	if err != nil {
		v.err = err.Error()
		return v
	}
	v.names = strings.Join(addr, ":")
	master, err := s.DoStrings("SENTINEL", "MASTER", SentinelMaster)
	if err != nil {
		v.err = err.Error()
		return v
	}
	for i := 0; i+1 < len(master); i += 2 {
		switch master[i] {
		case "flags":
			v.flags = master[i+1]
		case "failover-state":
			v.state = master[i+1]
		case "config-epoch":
			v.epoch = master[i+1]
		}
	}
	info, err := s.Do("INFO", "sentinel")
	if err != nil {
		v.err = err.Error()
		return v
	}
	v.tilt = fields(info, "sentinel_tilt")["sentinel_tilt"] == "1"
	return v
}

// busy reports whether v shows a failover under way or to come.
func (v sentinelView) busy(replica *RedisServer) bool {
	return v.tilt || v.names == replica.Addr() ||
		strings.Contains(v.flags, "s_down") || strings.Contains(v.flags, "o_down") ||
		strings.Contains(v.flags, "failover_in_progress")
}

func (v sentinelView) String() string {
	if v.err != "" {
		return fmt.Sprintf("sentinel %s: %s", v.sentinel, v.err)
	}
	s := fmt.Sprintf("sentinel %s names %s (flags %s, config-epoch %s", v.sentinel, v.names, v.flags, v.epoch)
	if v.state != "" {
		s += ", failover-state " + v.state
	}
	if v.tilt {
		s += ", in TILT mode"
	}
	return s + ")"
}

func describeViews(views []sentinelView) string {
	parts := make([]string, len(views))
	for i, v := range views {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

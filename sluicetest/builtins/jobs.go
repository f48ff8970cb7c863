package builtins

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// jobEnv names the job a copy of the test binary runs instead of its tests
// (see RunJob); the spec and output paths and the process's index follow.
const (
	jobEnv      = "SLUICETEST_JOB"
	jobSpecEnv  = "SLUICETEST_JOB_SPEC"
	jobOutEnv   = "SLUICETEST_JOB_OUT"
	jobIndexEnv = "SLUICETEST_JOB_INDEX"
)

// Job is work that a test runs in several OS processes at once, as pods
// would: the process's index (0 to n-1), the spec given to [RunJob] (JSON),
// and where to write its results.
type Job func(index int, spec []byte, out io.Writer) error

var jobs = map[string]Job{}

// RegisterJob makes job runnable by [RunJob] under name. Call it before
// [Main], from init or TestMain.
func RegisterJob(name string, job Job) {
	if _, dup := jobs[name]; dup {
		panic("sluicetest: job " + name + " registered twice")
	}
	jobs[name] = job
}

// RunJob starts n copies of the test binary, each running the job
// registered as name with spec (encoded as JSON), waits for all of them
// and returns what each wrote. The package's TestMain must call [Main].
func RunJob(t *testing.T, name string, n int, spec any) [][]byte {
	t.Helper()
	if _, ok := jobs[name]; !ok {
		t.Fatalf("sluicetest: no job %q registered", name)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	specPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	outs := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out := filepath.Join(dir, strconv.Itoa(i))
			cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
			cmd.Env = append(os.Environ(), jobEnv+"="+name, jobSpecEnv+"="+specPath,
				jobOutEnv+"="+out, jobIndexEnv+"="+strconv.Itoa(i))
			if combined, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("job %s, process %d: %v\n%s", name, i, err, combined)
				return
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Errorf("job %s, process %d: %v", name, i, err)
			}
			outs[i] = data
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return outs
}

// runJob is a job process's whole life; it returns the exit code.
func runJob(name string) int {
	job := jobs[name]
	if job == nil {
		fmt.Fprintf(os.Stderr, "sluicetest: no job %q registered in this binary\n", name)
		return 2
	}
	index, err := strconv.Atoi(os.Getenv(jobIndexEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluicetest: job index:", err)
		return 2
	}
	spec, err := os.ReadFile(os.Getenv(jobSpecEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluicetest: job spec:", err)
		return 2
	}
	f, err := os.Create(os.Getenv(jobOutEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := bufio.NewWriter(f)
	if err := job(index, spec, w); err != nil {
		fmt.Fprintf(os.Stderr, "job %s, process %d: %v\n", name, index, err)
		return 1
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// OpenStore connects a store to real Redis for a job process: backend is
// "go-redis" or "rueidis" on one server (addrs[0]), or "cluster/go-redis"
// or "cluster/rueidis" on a cluster (addrs: its nodes). The returned func
// closes the client.
func OpenStore(backend string, addrs []string, poolSize int) (sluice.Store, func(), error) {
	if len(addrs) == 0 {
		return nil, nil, fmt.Errorf("sluicetest: no address for %s", backend)
	}
	switch backend {
	case "go-redis":
		c := redis.NewClient(&redis.Options{Addr: addrs[0], MaxRetries: -1, PoolSize: poolSize})
		s, err := goredisstore.New(c)
		if err != nil {
			_ = c.Close()
			return nil, nil, fmt.Errorf("sluicetest: go-redis store: %w", err)
		}
		return s, func() { _ = c.Close() }, nil
	case "cluster/go-redis":
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: poolSize})
		s, err := goredisstore.New(c)
		if err != nil {
			_ = c.Close()
			return nil, nil, fmt.Errorf("sluicetest: go-redis cluster store: %w", err)
		}
		return s, func() { _ = c.Close() }, nil
	case "rueidis", "cluster/rueidis":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
		if err != nil {
			return nil, nil, fmt.Errorf("sluicetest: rueidis: %w", err)
		}
		s, err := rueidisstore.New(c)
		if err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("sluicetest: rueidis store: %w", err)
		}
		return s, c.Close, nil
	}
	return nil, nil, fmt.Errorf("sluicetest: unknown backend %q", backend)
}

// Package bench holds Sluice's comparative benchmarks. It is its own module
// so that it may import other rate limiters (golang.org/x/time/rate here)
// without the core module depending on them.
package bench

package httplimit_test

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// A policy in shadow mode, 2 requests a minute: the third request is let
// through with no rate-limit field, and its would-be denial is logged.
func ExamplePolicy_shadow() {
	store, _ := memstore.New(memstore.WithClock(sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))))
	tb, _ := tokenbucket.New(store)
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	mw, err := httplimit.Middleware([]httplimit.Policy{
		{Name: "per-client", Limiter: tb, Limit: sluice.PerMinute(2), Shadow: true},
	}, httplimit.WithLogger(logger))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		show(mw, "192.0.2.7:41000")
	}
	// Output:
	// 200
	// hello
	//
	// 200
	// hello
	//
	// level=INFO msg="httplimit: shadow denial" policy=per-client key=192.0.2.7 method=GET path=/hello retry_after=30s source=store
	// 200
	// hello
}

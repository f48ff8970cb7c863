package grpclimit_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/store/memstore"
)

// Two calls from one peer against a limit of one call a minute: the first
// is served, the second fails with ResourceExhausted (and a RetryInfo
// detail saying when to retry).
func Example() {
	store, err := memstore.New() // in production: a Redis store
	if err != nil {
		panic(err)
	}
	limiter, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	unary, err := grpclimit.UnaryServerInterceptor(grpclimit.Policy{
		Name:    "per-peer",
		Limiter: limiter,
		Limit:   sluice.PerMinute(1),
	})
	if err != nil {
		panic(err)
	}
	server := grpc.NewServer(grpc.ChainUnaryInterceptor(unary)) // register your services, then Serve
	defer server.Stop()

	// What the server does with each call, here without a network.
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 4242}})
	info := &grpc.UnaryServerInfo{FullMethod: "/orders.Orders/Create"}
	handler := func(context.Context, any) (any, error) { return "created", nil }
	for range 2 {
		resp, err := unary(ctx, nil, info, handler)
		fmt.Println(resp, status.Code(err))
	}
	// Output:
	// created OK
	// <nil> ResourceExhausted
}

// Package routers shows how to mount httplimit's middleware on the routers
// people use with net/http: chi, gorilla/mux and the standard library's
// ServeMux. It holds no code: httplimit.Middleware returns a plain
// func(http.Handler) http.Handler, which every one of them takes as it is
// (gorilla/mux after a conversion), so each mounting is one line. The
// tests of this module check every line below on a live server. It is its
// own module, so that Sluice's core does not depend on any router.
//
// Every snippet assumes
//
//	mw, err := httplimit.Middleware([]httplimit.Policy{
//		{Name: "per-client", Limiter: limiter, Limit: sluice.PerMinute(60)},
//	})
//
// where limiter is any sluice.Limiter, such as tokenbucket.New(store).
//
// # chi
//
// The whole service, 404 and 405 answers included:
//
//	r := chi.NewRouter()
//	r.Use(mw) // before the routes, as chi requires
//
// One route:
//
//	r.With(mw).Post("/orders", h)
//
// or several, in an inline group:
//
//	r.Group(func(r chi.Router) {
//		r.Use(mw)
//		r.Post("/orders", h)
//	})
//
// Middleware given to r.Use on the root router runs before chi has routed
// the request, so chi.URLParam is still empty there: a Key reading
// chi.URLParam(r, "id") works under r.With or inside r.Group, not under the
// root r.Use. For the same reason the root r.Use counts requests that end
// in 404 or 405, and a client over its limit gets 429 on unknown paths
// too.
//
// # gorilla/mux
//
// The whole service (matched routes only):
//
//	r := mux.NewRouter()
//	r.Use(mux.MiddlewareFunc(mw))
//
// One route:
//
//	r.Handle("/orders", mw(h)).Methods(http.MethodPost)
//
// or the routes of a subrouter:
//
//	api := r.PathPrefix("/api").Subrouter()
//	api.Use(mux.MiddlewareFunc(mw))
//	api.Handle("/orders", h).Methods(http.MethodPost)
//
// gorilla/mux runs the middlewares of r.Use after it has matched a route,
// so mux.Vars is set when they run, and a Key reading mux.Vars(r)["id"]
// works under r.Use as well as around one route's handler. It also means
// that r.Use does not run at all for a request that matches no route:
// 404 and 405 answers are neither counted nor limited, and carry no
// RateLimit header. To count them too, wrap the whole router instead,
//
//	handler := mw(r)
//
// where mux.Vars is empty, since the router has not run yet.
//
// # net/http ServeMux
//
// The whole service, 404 and 405 answers included:
//
//	handler := mw(mux)
//
// One route, with Go 1.22 patterns:
//
//	mux.Handle("POST /orders", mw(h))
//
// A Key reading r.PathValue("id") works only around one route's handler,
// as in mux.Handle("GET /users/{id}", mw(h)): around the whole mux the
// request has not been matched yet and PathValue returns "".
//
// # Keys from path parameters
//
// A Key should return an error rather than an empty key when the parameter
// is missing (the middleware then answers 400), so that a mounting where
// the parameter is not yet set fails loudly instead of putting every
// request in one bucket:
//
//	Key: func(r *http.Request) (string, error) {
//		if id := chi.URLParam(r, "id"); id != "" { // or mux.Vars(r)["id"], r.PathValue("id")
//			return id, nil
//		}
//		return "", errors.New("no user id in the path")
//	},
package routers

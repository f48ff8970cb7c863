package ext

import (
	"fmt"
	"reflect"

	"github.com/sluicehq/sluice"
)

// Forward is a decorator's As method in one line (see [sluice.As]): it
// sets *target to own, the decorator's implementation of the optional
// interfaces it forwards, when next serves the interface target points
// to and own implements it, and reports whether it did.
//
//	func (l *Limiter) As(target any) bool { return ext.Forward(target, l.next, forwarded{l}) }
//
// own is usually an unexported type whose methods (Refund, Reset,
// AllowBatch, Capacity, Lease, Release, LeaseBatch, or an interface of
// the author's own) pass each call through the decorator to next. Keep
// them off the decorator's own type, or a type assertion would claim them
// whatever the decorator wraps.
func Forward(target any, next sluice.Limiter, own any) bool {
	pt := reflect.TypeOf(target)
	if pt == nil || pt.Kind() != reflect.Pointer || pt.Elem().Kind() != reflect.Interface || own == nil {
		return false
	}
	iface := pt.Elem()
	if !reflect.TypeOf(own).Implements(iface) || !Serves(next, iface) {
		return false
	}
	reflect.ValueOf(target).Elem().Set(reflect.ValueOf(own))
	return true
}

// Delegate is the As method of a type that wraps a limiter and adds no
// behaviour of its own (such as a built stack): it sets *target to l's
// implementation of the interface target points to, as [sluice.As] finds
// it in l, and reports whether it did.
//
//	func (s *Stack) As(target any) bool { return ext.Delegate(target, s.outer) }
func Delegate(target any, l sluice.Limiter) bool {
	pt := reflect.TypeOf(target)
	if pt == nil || pt.Kind() != reflect.Pointer || pt.Elem().Kind() != reflect.Interface || l == nil {
		return false
	}
	if reflect.TypeOf(l).Implements(pt.Elem()) {
		reflect.ValueOf(target).Elem().Set(reflect.ValueOf(l))
		return true
	}
	a, ok := l.(interface{ As(target any) bool })
	return ok && a.As(target)
}

// Serves reports whether l serves the interface type iface, as
// [sluice.As] would find it.
func Serves(l sluice.Limiter, iface reflect.Type) bool {
	if l == nil || iface == nil || iface.Kind() != reflect.Interface {
		return false
	}
	if reflect.TypeOf(l).Implements(iface) {
		return true
	}
	a, ok := l.(interface{ As(target any) bool })
	return ok && a.As(reflect.New(iface).Interface())
}

// Require is for decorators' constructors: it returns next's
// implementation of T, or an error naming both layers (the decorator pkg
// and next's type) and what is missing, wrapping [sluice.ErrUnsupported],
// so that a stack that cannot work fails when it is built, not on its
// first request. A nil next is an error too.
func Require[T any](pkg string, next sluice.Limiter) (T, error) {
	var zero T
	if IsNil(next) {
		return zero, fmt.Errorf("%s: the wrapped limiter must not be nil", pkg)
	}
	t, ok := sluice.As[T](next)
	if !ok {
		return zero, fmt.Errorf("%s: %w: %s cannot wrap %T, which is no %s",
			pkg, sluice.ErrUnsupported, pkg, next, reflect.TypeFor[T]())
	}
	return t, nil
}

// RequireNext is Require for a decorator that needs nothing optional: it
// refuses a nil next only (see [IsNil]).
func RequireNext(pkg string, next sluice.Limiter) error {
	if IsNil(next) {
		return fmt.Errorf("%s: the wrapped limiter must not be nil", pkg)
	}
	return nil
}

// IsNil reports whether v is nil or an interface holding a nil pointer
// (or other nil value) of a concrete type, such as a (*redis.Client)(nil)
// given as a redis.Scripter: what a constructor refuses, as a store's New
// refuses a nil client and a decorator's New a nil limiter.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

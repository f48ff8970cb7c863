// Package plugin proves Sluice's extension API from outside: a module of
// its own that imports Sluice's public packages only and defines an
// algorithm (firstwindow: a fixed window that opens at a key's first
// request) and a Store (prefixstore: every key under a tenant's prefix),
// then holds them to Sluice's conformance kit and uses them under its
// decorators and its HTTP middleware. See docs/design.md, "Writing an
// algorithm, a store or a decorator".
package plugin

package ext_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/ext"
)

func TestShadowMarksAContext(t *testing.T) {
	ctx := context.Background()
	if ext.IsShadow(ctx) {
		t.Fatal("a plain context is marked as shadow")
	}
	if !ext.IsShadow(ext.WithShadow(ctx)) {
		t.Fatal("WithShadow's context is not marked")
	}
	child, cancel := context.WithCancel(ext.WithShadow(ctx))
	defer cancel()
	if !ext.IsShadow(child) {
		t.Fatal("a child of a shadow context lost the mark")
	}
}

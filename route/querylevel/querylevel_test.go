package querylevel

import (
	"math"
	"testing"

	"github.com/tokenrouter/tokenrouter/route"
)

func TestStrongFractionAndLength(t *testing.T) {
	a, err := New(route.Spec{Models: []string{"weak", "strong"}, Params: map[string]string{"strong": "0.3"}})
	if err != nil {
		t.Fatal(err)
	}
	strong := 0
	for id := range uint64(5000) {
		strong += a.(*Algorithm).Entry(&route.Request{ID: id, Params: route.Params{Seed: id + 1}})
	}
	if f := float64(strong) / 5000; math.Abs(f-0.3) > 0.02 {
		t.Fatalf("strong fraction %.3f, want 0.3", f)
	}
	l, err := New(route.Spec{Models: []string{"weak", "strong"}, Params: map[string]string{"score": "length", "threshold": "4"}})
	if err != nil {
		t.Fatal(err)
	}
	if l.(*Algorithm).Entry(&route.Request{PromptLen: 3}) != 0 || l.(*Algorithm).Entry(&route.Request{PromptLen: 4}) != 1 {
		t.Fatal("length score")
	}
	if _, err := New(route.Spec{Models: []string{"a", "b"}, Params: map[string]string{"score": "oracle"}}); err == nil {
		t.Fatal("unknown score accepted")
	}
}

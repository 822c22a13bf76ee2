package stream

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"
)

func TestRecvDeliversInOrderThenEOF(t *testing.T) {
	s := New(1, nil)
	ctx := context.Background()
	go func() {
		for i := range 100 {
			s.Push([]int32{int32(i)}, []int8{int8(i % 2)})
		}
		s.Finish(Length, nil)
	}()
	var got []int32
	var by []int8
	var c Chunk
	for {
		err := s.Recv(ctx, &c)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.Tokens...)
		by = append(by, c.By...)
		if c.Done && c.Reason != Length {
			t.Fatalf("reason %q", c.Reason)
		}
	}
	if len(got) != 100 || len(by) != 100 {
		t.Fatalf("got %d tokens, %d owners", len(got), len(by))
	}
	for i := range got {
		if got[i] != int32(i) || by[i] != int8(i%2) {
			t.Fatalf("position %d: token %d by %d", i, got[i], by[i])
		}
	}
}

func TestCancelAndError(t *testing.T) {
	called := 0
	s := New(7, func() { called++ })
	s.Push([]int32{5}, []int8{0})
	s.Close()
	if called != 1 {
		t.Fatalf("cancel called %d times", called)
	}
	s.Finish(Cancelled, context.Canceled)
	s.Close()
	if called != 1 {
		t.Fatal("Close after finish called cancel again")
	}
	r, err := s.Wait(context.Background())
	if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) || !slices.Equal(r.Tokens, []int32{5}) {
		t.Fatalf("Wait = %v, %v", r, err)
	}
	f := New(8, nil)
	if !f.Finish(Error, errors.New("boom")) || f.Finish(Length, nil) {
		t.Fatal("only the first Finish counts")
	}
	var c Chunk
	if err := f.Recv(context.Background(), &c); err == nil || err.Error() != "boom" || !c.Done || c.Reason != Error {
		t.Fatalf("Recv = %v, %+v", err, c)
	}
}

func TestRecvHonoursContext(t *testing.T) {
	s := New(1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	var c Chunk
	if err := s.Recv(ctx, &c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}

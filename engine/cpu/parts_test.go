package cpu

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
)

// TestSeqPartsCoverTheBatch checks the sequence-split plan: parts are
// non-empty runs of whole sequences covering every row and output once,
// with roughly equal estimated cost.
func TestSeqPartsCoverTheBatch(t *testing.T) {
	e := openModel(t, "stories260K.bin", Options{Threads: 2})
	for _, lens := range [][]int{{1, 1}, {1, 1, 1, 1}, {5, 1, 1, 1, 1, 1, 1, 30}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}} {
		in := make([]engine.Input, len(lens))
		for i, n := range lens {
			toks := make([]int32, n)
			for j := range toks {
				toks[j] = int32(1 + j)
			}
			in[i] = engine.Input{Seq: engine.SeqID(i), Tokens: toks}
			if i%3 == 0 {
				in[i].Want = engine.WantAllTokens
			}
		}
		T, O, err := e.admit(in)
		if err != nil {
			t.Fatal(err)
		}
		parts := e.planSeqParts(in, T)
		e.rollback()
		if parts != min(len(in), 2*e.pool.n) {
			t.Fatalf("lens %v: %d parts", lens, parts)
		}
		if e.partRow[0] != 0 || e.partOut[0] != 0 || e.partRow[parts] != T || e.partOut[parts] != O {
			t.Fatalf("lens %v: parts %v %v do not cover %d rows, %d outputs", lens, e.partRow[:parts+1], e.partOut[:parts+1], T, O)
		}
		// every boundary falls between sequences and every part is non-empty
		r, o, p := 0, 0, 1
		for i := range in {
			r += len(in[i].Tokens)
			if in[i].Want&engine.WantAllTokens != 0 {
				o += len(in[i].Tokens)
			} else {
				o++
			}
			if p < parts && e.partRow[p] == r {
				if e.partOut[p] != o {
					t.Fatalf("lens %v: part %d starts at row %d but output %d, want %d", lens, p, r, e.partOut[p], o)
				}
				p++
			}
		}
		if p != parts {
			t.Fatalf("lens %v: boundaries %v not at sequence ends", lens, e.partRow[:parts+1])
		}
		for q := range parts {
			if e.partRow[q+1] <= e.partRow[q] {
				t.Fatalf("lens %v: empty part %d in %v", lens, q, e.partRow[:parts+1])
			}
		}
	}
	if e.KVBlocksInUse() != 0 {
		t.Fatalf("%d KV blocks left after rollback", e.KVBlocksInUse())
	}
}

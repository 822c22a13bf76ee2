package tokenizer

import (
	"container/heap"
	"strings"
	"unicode/utf8"
)

// normalizeSPM applies SentencePiece's whitespace handling: optional removal
// of extra spaces, the dummy prefix, and escaping of spaces as U+2581.
func (t *Tokenizer) normalizeSPM(text string) string {
	if t.RemoveExtraWhitespace {
		text = strings.TrimLeft(text, " ")
		if text == "" {
			return ""
		}
		var sb strings.Builder
		prevSpace := false
		for i := 0; i < len(text); i++ {
			c := text[i]
			if c == ' ' {
				if prevSpace {
					continue
				}
				prevSpace = true
			} else {
				prevSpace = false
			}
			sb.WriteByte(c)
		}
		text = strings.TrimRight(sb.String(), " ")
	}
	if t.AddSpacePrefix {
		text = " " + text
	}
	return strings.ReplaceAll(text, " ", spaceSymbol)
}

type spmSymbol struct {
	prev, next int
	start, end int // byte range in the normalised text
}

type spmBigram struct {
	left, right int
	score       float32
	size        int // byte length of the merged text, to detect stale entries
}

// bigramQueue is a container/heap of candidate merges, best first.
type bigramQueue []spmBigram

// Len, Less, Swap, Push and Pop implement heap.Interface.

func (q bigramQueue) Len() int { return len(q) }
func (q bigramQueue) Less(i, j int) bool {
	if q[i].score != q[j].score {
		return q[i].score > q[j].score
	}
	return q[i].left < q[j].left
}
func (q bigramQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bigramQueue) Push(x any)   { *q = append(*q, x.(spmBigram)) }
func (q *bigramQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// mergeable reports whether a piece may be formed by merging: in
// SentencePiece only normal, user-defined and unused pieces take part.
func (t *Tokenizer) mergeable(s string) (int32, bool) {
	id, ok := t.index[s]
	if !ok {
		return 0, false
	}
	switch t.types[id] {
	case TypeNormal, TypeUserDefined, TypeUnused:
		return id, true
	}
	return 0, false
}

// encodeSPM runs SentencePiece BPE: split into characters, repeatedly merge
// the adjacent pair whose concatenation is the highest-scoring piece
// (leftmost first on ties), then map symbols to ids with byte fallback.
func (t *Tokenizer) encodeSPM(out []int32, text string) []int32 {
	if text == "" {
		return out
	}
	s := t.normalizeSPM(text)
	if s == "" {
		return out
	}
	syms := make([]spmSymbol, 0, len(s))
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		syms = append(syms, spmSymbol{prev: len(syms) - 1, next: len(syms) + 1, start: i, end: i + n})
		i += n
	}
	syms[len(syms)-1].next = -1
	q := make(bigramQueue, 0, len(syms))
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		piece := s[syms[l].start:syms[r].end]
		id, ok := t.mergeable(piece)
		if !ok {
			return
		}
		heap.Push(&q, spmBigram{left: l, right: r, score: t.scores[id], size: len(piece)})
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for q.Len() > 0 {
		bg := heap.Pop(&q).(spmBigram)
		l, r := &syms[bg.left], &syms[bg.right]
		if l.end == l.start || r.end == r.start || r.end-l.start != bg.size || l.next != bg.right {
			continue // stale: one side was merged away since
		}
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		r.start, r.end = 0, 0
		try(l.prev, bg.left)
		try(bg.left, l.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		out = t.resegment(out, s[syms[i].start:syms[i].end])
	}
	return out
}

func (t *Tokenizer) resegment(out []int32, piece string) []int32 {
	if id, ok := t.index[piece]; ok {
		return append(out, id)
	}
	for i := 0; i < len(piece); i++ {
		if id := t.bytes[piece[i]]; id >= 0 {
			out = append(out, id)
		} else if t.UNK >= 0 {
			out = append(out, t.UNK)
		}
	}
	return out
}

package kernels

// Attention kernels. Keys are stored in blocks of KeyBlock positions,
// transposed: dimension d of position p of a block at kt[d·KeyBlock+p], so
// a vector lane holds one position. Every lane computes its own sequential
// sum of separately rounded products; the vector width changes nothing, so
// the reference and every level give the same bits.

// KeyBlock is the number of positions of a transposed key block.
const KeyBlock = 16

// ScoresFunc sets s[h·sStride+p] = Σ_d q[h·hd+d]·kt[d·KeyBlock+p] for every
// head h < len(q)/hd and position p < KeyBlock, summing the rounded
// products in order of d.
type ScoresFunc func(q []float32, hd int, kt []float32, s []float32, sStride int)

// ValuesFunc adds Σ_p e[p]·v[p·stride+d] to out[d] for d < len(out),
// adding the rounded products in order of p.
type ValuesFunc func(e, v []float32, stride int, out []float32)

// scoresRef is the reference ScoresFunc.
func scoresRef(q []float32, hd int, kt []float32, s []float32, sStride int) {
	for h := 0; h < len(q)/hd; h++ {
		var acc [KeyBlock]float32
		for d, qd := range q[h*hd : (h+1)*hd] {
			row := kt[d*KeyBlock : (d+1)*KeyBlock]
			for p := range acc {
				acc[p] += float32(qd * row[p]) // the conversion keeps the product rounded (no fusion)
			}
		}
		copy(s[h*sStride:h*sStride+KeyBlock], acc[:])
	}
}

// valuesRef is the reference ValuesFunc.
func valuesRef(e, v []float32, stride int, out []float32) {
	for p, w := range e {
		row := v[p*stride : p*stride+len(out)]
		for d := range out {
			out[d] += float32(w * row[d])
		}
	}
}

// Attention returns the attention kernels of the set's level.
func (s *Set) Attention() (ScoresFunc, ValuesFunc) {
	return attnFast(s.level.base())
}

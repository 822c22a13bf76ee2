package route

import "github.com/tokenrouter/tokenrouter/engine"

// Wrapper delegates every hook, optional ones included, to Inner: embed it
// in a type that changes one hook of an algorithm and keeps the others.
// Where Inner lacks an optional interface, the method does what the
// runtime does without it.
type Wrapper struct {
	// Inner is the wrapped algorithm.
	Inner Algorithm
}

// Route delegates.
func (w Wrapper) Route(s *Step, d []Decision) { w.Inner.Route(s, d) }

// NewState delegates (nil when the algorithm is stateless).
func (w Wrapper) NewState(r *Request) State {
	if s, ok := w.Inner.(Stater); ok {
		return s.NewState(r)
	}
	return nil
}

// Want delegates (no optional outputs by default).
func (w Wrapper) Want(model int, r *Request) engine.Want {
	if x, ok := w.Inner.(Wanter); ok {
		return x.Want(model, r)
	}
	return 0
}

// Entry delegates (model 0 by default).
func (w Wrapper) Entry(r *Request) int {
	if x, ok := w.Inner.(Entrant); ok {
		return x.Entry(r)
	}
	return 0
}

// Receive delegates.
func (w Wrapper) Receive(r *Request, m *Message) {
	if x, ok := w.Inner.(Receiver); ok {
		x.Receive(r, m)
	}
}

// Send delegates.
func (w Wrapper) Send(r *Request, m *Message) {
	if x, ok := w.Inner.(Sender); ok {
		x.Send(r, m)
	}
}

// Process delegates (not known when the algorithm does not state it).
func (w Wrapper) Process() (p, c [][]float64, ok bool) {
	if x, ok := w.Inner.(Predictable); ok {
		return x.Process()
	}
	return nil, nil, false
}

// Speculable delegates (no speculation by default).
func (w Wrapper) Speculable(from, to int) bool {
	if x, ok := w.Inner.(Speculable); ok {
		return x.Speculable(from, to)
	}
	return false
}

// Wrap returns a registry in which name builds base's algorithm passed
// through wrap.
func Wrap(base *Registry, name string, wrap func(Algorithm) Algorithm) *Registry {
	reg := NewRegistry()
	_ = reg.Register(name, func(s Spec) (Algorithm, error) {
		a, err := base.New(name, s)
		if err != nil {
			return nil, err
		}
		return wrap(a), nil
	})
	return reg
}

package loader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/steptime"
)

// KindSim names the simulated engine (engine/sim): no weights, a step
// takes the wall-clock time of its latency profile.
const KindSim = "sim"

// minSimVocab is the smallest simulated vocabulary: the server's simulated
// text needs the 256 byte tokens after the three specials.
const minSimVocab = 259

// simKind opens engine/sim models: Profile (or Latency), Seed, VocabSize,
// ContextLength, Agree, AgreeSeed and NoSpin.
func simKind() Kind {
	return Kind{
		Name: KindSim,
		Check: func(m config.Model) error {
			if _, err := SimProfile(m); err != nil {
				return err
			}
			if m.VocabSize != 0 && m.VocabSize < minSimVocab {
				return fmt.Errorf("vocab_size %d: a simulated model needs at least %d tokens", m.VocabSize, minSimVocab)
			}
			if m.ContextLength != 0 && m.ContextLength < 2 {
				return fmt.Errorf("context_length %d too small", m.ContextLength)
			}
			if m.Agree < 0 || m.Agree > 1 {
				return fmt.Errorf("agree %g: want a probability", m.Agree)
			}
			if len(m.CPUs) > 0 {
				return errors.New("cpus apply to engines that compute on this machine (cpu), not to sim")
			}
			return nil
		},
		Engine: func(_ context.Context, m config.Model) (engine.Engine, error) {
			prof, err := SimProfile(m)
			if err != nil {
				return nil, err
			}
			return sim.New(sim.Config{Name: m.Name, Profile: prof, Seed: m.Seed, VocabSize: m.VocabSize,
				ContextLength: m.ContextLength, Agree: m.Agree, AgreeSeed: m.AgreeSeed, Spin: simSpin(m)}), nil
		},
		Text: func(m config.Model, _ int) (Text, error) {
			var t Text
			err := t.setTemplate(m, "")
			return t, err
		},
		StepLatency: func(m config.Model) time.Duration {
			prof, _ := SimProfile(m) // checked
			return prof.Latency(1, 1, 0)
		},
	}
}

// simSpin is the simulated engine's spin window for m: none with NoSpin
// (sim.Config.Spin < 0), else the engine's default.
func simSpin(m config.Model) time.Duration {
	if m.NoSpin {
		return -1
	}
	return 0
}

// SimProfile resolves a simulated model's latency profile: its explicit
// Latency, or its Profile "preset/model" (a bare preset name picks the
// preset's model named like m). A preset is a built-in one or a profile
// file ending in .json (as bench calibrate writes).
func SimProfile(m config.Model) (sim.Profile, error) {
	if m.Latency != nil {
		if m.Profile != "" {
			return sim.Profile{}, errors.New("give profile or latency, not both")
		}
		return latencyProfile(*m.Latency)
	}
	if m.Profile == "" {
		return sim.Profile{}, errors.New("engine sim needs profile (e.g. paper-r2r/slm) or latency")
	}
	preset, model := m.Profile, m.Name
	if !strings.HasSuffix(preset, ".json") {
		if i := strings.LastIndex(preset, "/"); i >= 0 {
			preset, model = preset[:i], preset[i+1:]
		}
	}
	p, err := sim.LoadPreset(preset)
	if err != nil {
		return sim.Profile{}, err
	}
	for i, n := range p.Models {
		if n == model {
			return p.Profiles[i], nil
		}
	}
	return sim.Profile{}, fmt.Errorf("profile %q: preset %s has models %s", m.Profile, p.Name, strings.Join(p.Models, ", "))
}

// latencyProfile is the profile of an explicit latency: its curve, or
// Base + PerSeq·b + PerToken·e.
func latencyProfile(l config.Latency) (sim.Profile, error) {
	if l.Interference < 0 {
		return sim.Profile{}, errors.New("latency: negative interference")
	}
	if l.Curve != nil {
		if l.Base != 0 || l.PerSeq != 0 || l.PerToken != 0 {
			return sim.Profile{}, errors.New("latency: give a curve or base/per_seq/per_token, not both")
		}
		if err := l.Curve.Validate(); err != nil {
			return sim.Profile{}, fmt.Errorf("latency: %w", err)
		}
		return sim.Profile{Curve: *l.Curve, Interference: l.Interference}, nil
	}
	if l.Base < 0 || l.PerSeq < 0 || l.PerToken < 0 {
		return sim.Profile{}, errors.New("latency: negative duration")
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return sim.Profile{Curve: steptime.Linear(ms(l.Base), ms(l.PerSeq), ms(l.PerToken)), Interference: l.Interference}, nil
}

package main

import (
	"strings"
	"testing"
)

// TestServeReplicasFlag: --replicas NAME=N sets the replicas of the models
// serve's flags describe; bad values and names are refused naming the
// flag, and so is --replicas beside --config (the file says it).
func TestServeReplicasFlag(t *testing.T) {
	cfg := serveFlagsConfig(t, "--engine", "sim", "--replicas", "slm=2", "--replicas", "llm=3")
	if cfg.Models[0].Replicas != 2 || cfg.Models[1].Replicas != 3 {
		t.Fatalf("models %+v, want 2 and 3 replicas", cfg.Models)
	}
	if p := cfg.Presets[0]; p.ReplicasOf(cfg.Models[0]) != 2 {
		t.Fatalf("preset %+v runs %d replicas of slm", p, p.ReplicasOf(cfg.Models[0]))
	}
	for args, want := range map[string]string{
		"--engine sim --replicas xl=2":              `--replicas xl=2: no model "xl" (have slm, llm)`,
		"--engine sim --replicas slm=0":             "--replicas: replicas \"slm=0\": want 1 to 64 replicas",
		"--engine sim --replicas slm":               "want NAME=N",
		"--config x.yaml --replicas slm=2":          "--replicas: describe models and presets in the --config file",
		"--engine sim --replicas slm=2,slm=3":       `model "slm" given twice`,
		"--engine sim --replicas slm=2 --processes": "",
	} {
		cmd := newServeCmd()
		if err := cmd.ParseFlags(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		_, err := serveConfig(cmd, flagsOf(t, cmd))
		if want == "" {
			if err != nil { // the configuration is fine; starting refuses (system.ErrReplicasInProcess)
				t.Errorf("%s: %v", args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// TestBenchReplicas: bench run measures a deployment with replicas, and
// refuses a model it does not have and lockstep (one engine per model).
func TestBenchReplicas(t *testing.T) {
	out, err := runBenchCmd(t, "run", "--engine", "sim", "--replicas", "slm=2", "--thresholds", "1,1", "--concurrency", "4",
		"--duration", "200ms", "--warmup", "50ms", "--max-tokens", "32", "--format", "json")
	if err != nil || !strings.Contains(out, `"tokens_per_second"`) {
		t.Fatalf("bench run with replicas: %v\n%s", err, out)
	}
	if _, err := runBenchCmd(t, "run", "--engine", "sim", "--replicas", "xl=2", "--duration", "10ms"); err == nil || !strings.Contains(err.Error(), `no model "xl"`) {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := runBenchCmd(t, "run", "--engine", "sim", "--replicas", "slm=2", "--system", "lockstep", "--duration", "10ms"); err == nil ||
		!strings.Contains(err.Error(), "replicas") {
		t.Errorf("lockstep with replicas: %v", err)
	}
}

package plot

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func TestWritesDecodablePNGs(t *testing.T) {
	dir := t.TempDir()
	pts := []Point{{"tokenrouter", 1, 60, ""}, {"tokenrouter", 4, 207, ""}, {"lockstep", 1, 60, ""}, {"lockstep", 4, 138, ""}}
	a := filepath.Join(dir, "throughput.png")
	if err := Lines(a, "Throughput", "concurrency", "tok/s", pts, true); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(dir, "validate.png")
	if err := Scatter(b, "Predicted vs measured", "predicted", "measured", []Point{{"N=4", 207.9, 206, "B=(1,3)"}, {"N=4", 187.2, 186, "B=(1,1)"}}, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{a, b} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if w := img.Bounds().Dx(); w < 500 {
			t.Fatalf("%s: %d px wide", f, w)
		}
	}
	if err := Lines(filepath.Join(dir, "x.svg"), "", "", "", pts, false); err == nil {
		t.Fatal("non-PNG path accepted")
	}
}

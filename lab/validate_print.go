package lab

import (
	"fmt"
	"io"

	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// printValidate prints the human table of a validation.
func printValidate(w io.Writer, profile string, rep ValidateReport) {
	fmt.Fprintf(w, "profile %s (L = %s ms), %s %s, max-wait %gms, %.0fs per point in %d rounds, %s placement\n",
		profile, latencies(rep.LatencyMS), rep.Algorithm, paramString(rep.Params), rep.MaxWaitMS, rep.SecondsPerPoint, rep.Rounds, rep.Placement)
	printSteps(w, rep.Steps)
	fmt.Fprintf(w, "%3s %-5s %10s %10s %8s %7s %10s %8s %11s %10s %8s %6s %6s %7s %s\n", "N", "B", "measured", "predicted", "error", "routed",
		"at routed", "error", "steps/curve", "@speed", "error", "method", "slices", "retries", "best")
	for _, pt := range rep.Points {
		printValidatePoint(w, pt)
	}
	fmt.Fprintln(w)
	for _, s := range rep.PerConcurrency {
		printValidateN(w, s)
	}
	fmt.Fprintf(w, "all match: %v; all resolved: %v; all consistent: %v; all within %.0f%%: %v (at the engines' step speed: %v)\n", rep.AllMatch, rep.AllResolved,
		rep.AllConsistent, rep.TolerancePercent, rep.AllWithin, rep.AllWithinAtStepSpeed)
	fmt.Fprintln(w, "steps/curve: each model's steps over its curve for the same steps; @speed: the prediction with the curves scaled by it")
}

// printValidatePoint prints one point's row.
func printValidatePoint(w io.Writer, pt ValidatePoint) {
	best := ""
	if pt.PredictedBest {
		best += " predicted"
	}
	if pt.MeasuredBest {
		best += " measured"
	}
	mark := ""
	if !pt.Within {
		mark = "!"
	}
	speedMark := ""
	if !pt.WithinAtStepSpeed {
		speedMark = "!"
	}
	fmt.Fprintf(w, "%3d %-5s %10.2f %10.2f %+7.2f%%%1s %6.3f %10.2f %+7.2f%% %11s %10.2f %+7.2f%%%1s %6s %6d %7d%s\n", pt.Concurrency, perfmodel.FormatB(pt.Thresholds),
		pt.TokensPerSecond, pt.Predicted, pt.ErrorPercent, mark, pt.RoutedFraction, pt.PredictedAtRouted, pt.ErrorAtRoutedPercent,
		stepRatios(pt.StepOverCurve), pt.PredictedAtStepSpeed, pt.ErrorAtStepSpeedPercent, speedMark, pt.Method, pt.Slices, pt.Retries, best)
}

// printValidateN prints one concurrency's verdict.
func printValidateN(w io.Writer, s ValidateN) {
	lead := "no other point"
	switch {
	case s.RunnerUpB1 > 0 && s.Pairs >= 2:
		lead = fmt.Sprintf("leads B1=%d by %.2f ± %.2f tok/s (95%%, %d pairs)", s.RunnerUpB1, s.Margin, s.MarginCI95, s.Pairs)
	case s.RunnerUpB1 > 0:
		lead = fmt.Sprintf("leads B1=%d by %.2f tok/s (%d pair: no interval)", s.RunnerUpB1, s.Margin, s.Pairs)
	}
	cal := ""
	if len(s.LatencyMS) > 0 {
		cal = fmt.Sprintf("; calibrated around it: L = %.2f ms", s.LatencyMS)
	}
	behind := ""
	if !s.Match {
		behind = fmt.Sprintf("; the predicted best is behind by %.2f ± %.2f tok/s, consistent=%v", s.PredictedLead, s.PredictedLeadCI95, s.Consistent)
	}
	fmt.Fprintf(w, "N=%d: predicted best B1=%d (ahead of the next by %.2f tok/s), measured best B1=%d, match=%v, resolved=%v (%s)%s, max |error| %.2f%%%s\n",
		s.Concurrency, s.PredictedBestB1, s.PredictedMargin, s.MeasuredBestB1, s.Match, s.Resolved, lead, behind, s.MaxErrorPercent, cal)
}

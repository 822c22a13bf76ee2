// Package lab is TokenRouter's measurement lab: it checks the throughput
// model (perfmodel) against the runtime as package bench drives it. It
// calibrates the step-time curves of real models (Calibrate), predicts
// what each serving system should commit per second from them (Predict)
// and sets the predictions beside measured rows (AddPredictions, Compare),
// validates the model's throughput and its best thresholds against
// measured points (Validate), and measures how much models slow each other
// when they step at once (MeasureInterference). The Run* functions and
// Compare are the `tokenrouter bench` subcommands' library calls: each
// takes its command's parsed flags and writes the command's output.
package lab

// Package tiny holds a pair of tiny trained models built into the binary, so
// that a first `tokenrouter serve` writes real text with nothing to
// download: Karpathy's TinyStories stories260K (the small model, 260K
// parameters) and llama2xs (the large one, 279K parameters, trained
// separately), both llama2.c checkpoints over the same 512-token
// vocabulary tok512. Together they are about 2.2 MB. Their text is
// childish stories.
//
// The folder also holds files the tests read that are not embedded (the
// same small model as GGUF, the vocabulary as a SentencePiece model).
// SOURCES.md says where every file was taken from, with its hashes;
// LICENSES.md gives the notices (MIT) and is built in beside the models.
//
// The bytes are the binary's read-only data: File hands them out without a
// copy, and nothing may write to them.
package tiny

import (
	_ "embed" // the model files
	"slices"
	"unsafe"
)

// The embedded files.
const (
	// SLM is the small model: stories260K as a llama2.c checkpoint.
	SLM = "stories260K.bin"
	// LLM is the large model: llama2xs as a llama2.c checkpoint.
	LLM = "llama2xs-model.bin"
	// Tokenizer is the vocabulary both share, in llama2.c's tokenizer.bin
	// format.
	Tokenizer = "tok512.bin"
	// Licenses holds the files' copyright notices and licence text (MIT),
	// built in with them.
	Licenses = "LICENSES.md"
)

//go:embed stories260K.bin
var slm string

//go:embed llama2xs-model.bin
var llm string

//go:embed tok512.bin
var tok string

//go:embed LICENSES.md
var licenses string

// Names lists the embedded model files.
func Names() []string { return []string{SLM, LLM, Tokenizer} }

// File returns the bytes of the embedded file name (one of Names, or
// Licenses), and false for a name not embedded. The slice aliases the
// binary's read-only data: a write to it faults.
func File(name string) ([]byte, bool) {
	var s string
	switch name {
	case SLM:
		s = slm
	case LLM:
		s = llm
	case Tokenizer:
		s = tok
	case Licenses:
		s = licenses
	default:
		return nil, false
	}
	return unsafe.Slice(unsafe.StringData(s), len(s)), true
}

// Known reports whether name is an embedded model file.
func Known(name string) bool { return slices.Contains(Names(), name) }

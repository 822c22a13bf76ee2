package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Error types and codes, as OpenAI's API spells them, and this server's
// own: server_shutdown (type and code) ends a request the shutdown drain
// timeout cut off.
const (
	typeInvalidRequest = "invalid_request_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
	typeShutdown       = "server_shutdown"
)

// retryAfter is the Retry-After of 429 and 503 answers, in seconds.
const retryAfter = "1"

// errHardStop is the cause with which Serve cancels the requests still in
// flight when the shutdown drain timeout expires.
var errHardStop = errors.New("server: shutdown timeout reached")

// stoppedByShutdown reports whether ctx was cancelled by the shutdown
// drain timeout (rather than by its client leaving).
func stoppedByShutdown(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errHardStop)
}

// apiError is an error answered to the client as
// {"error":{"message","type","param","code"}}.
type apiError struct {
	status  int
	message string
	typ     string
	param   string
	code    string
	cause   string // why an admitted request ended, for metrics (abort reasons)
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.typ, e.message) }

// errorBody is the JSON shape of an error.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	b := errorBody{Error: errorObject{Message: e.message, Type: e.typ}}
	if e.param != "" {
		p := e.param
		b.Error.Param = &p
	}
	if e.code != "" {
		c := e.code
		b.Error.Code = &c
	}
	return b
}

func badRequest(param, code, format string, a ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, a...), typ: typeInvalidRequest, param: param, code: code}
}

func errNotFoundModel(name string, have []string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeInvalidRequest, param: "model", code: "model_not_found",
		message: fmt.Sprintf("The model %s does not exist; this server serves %q", clip(name), have)}
}

func errUnauthorized(msg string) *apiError {
	return &apiError{status: http.StatusUnauthorized, typ: typeInvalidRequest, code: "invalid_api_key", message: msg}
}

func errBodyTimeout(d time.Duration) *apiError {
	return &apiError{status: http.StatusRequestTimeout, typ: typeInvalidRequest, code: "request_timeout",
		message: fmt.Sprintf("The request body did not arrive within %v", d)}
}

func errTooLarge(limit int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, typ: typeInvalidRequest, code: "request_too_large",
		message: fmt.Sprintf("Request body exceeds the limit of %d bytes", limit)}
}

func errBusy(limit int) *apiError {
	return &apiError{status: http.StatusTooManyRequests, typ: typeRateLimit, code: "rate_limit_exceeded",
		message: fmt.Sprintf("The server is at its limit of %d requests in flight; retry later", limit)}
}

func errUnavailable(msg string) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, typ: typeServer, code: "service_unavailable", message: msg, cause: abortUnavailable}
}

func errShuttingDown(msg string) *apiError {
	e := errUnavailable(msg)
	e.cause = abortShutdown
	return e
}

// errServerShutdown ends a request the shutdown drain timeout cut off: a
// 503 before a stream opened, an error event after.
func errServerShutdown() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, typ: typeShutdown, code: typeShutdown, cause: abortShutdown,
		message: "The server shut down before the request finished; retry later"}
}

func errInternal(err error) *apiError {
	return &apiError{status: http.StatusInternalServerError, typ: typeServer, code: "internal_error", message: err.Error()}
}

func errNotFoundPath(path string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeInvalidRequest, code: "not_found", message: "No route " + clip(path)}
}

func errMethod(method, path string, allow string) *apiError {
	return &apiError{status: http.StatusMethodNotAllowed, typ: typeInvalidRequest, code: "method_not_allowed",
		message: fmt.Sprintf("Method %s is not allowed on %s (use %s)", method, path, allow)}
}

// writeError answers e.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, e.status, e.body())
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errInternal(err).body())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// decodeJSON reads a JSON body of at most the configured size into v,
// within the body timeout. The body must be declared JSON
// (application/json, parameters such as charset allowed).
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) *apiError {
	if aerr := checkJSONType(r.Header.Get("Content-Type")); aerr != nil {
		return aerr
	}
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return errTooLarge(limit)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) // unsupported only by test recorders
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errMoreJSON
	}
	if err == nil {
		_, err = io.Copy(io.Discard, body) // trailing space: the body ends within the timeout too
	}
	if err == nil {
		// The server's own read now watches for the client leaving; it
		// must not time out.
		_ = rc.SetReadDeadline(time.Time{})
		return nil
	}
	// The deadline stays: the server does not wait for the rest of a
	// refused body.
	w.Header().Set("Connection", "close")
	var (
		tooBig *http.MaxBytesError
		netErr net.Error
	)
	switch {
	case errors.As(err, &tooBig):
		return errTooLarge(limit)
	case errors.As(err, &netErr) && netErr.Timeout():
		return errBodyTimeout(s.cfg.BodyTimeout)
	case errors.Is(err, errMoreJSON):
		return badRequest("", "invalid_json", "The request body holds more than one JSON value")
	}
	return jsonError(err)
}

// decodeFields is decodeJSON for an endpoint whose fields are in t: a
// field t does not know, or refuses with the value given, is a 400 naming
// it.
func (s *Server) decodeFields(w http.ResponseWriter, r *http.Request, t fieldTable, v any) *apiError {
	var raw json.RawMessage
	if aerr := s.decodeJSON(w, r, &raw); aerr != nil {
		return aerr
	}
	if aerr := t.check(raw, ""); aerr != nil {
		return aerr
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return jsonError(err)
	}
	return nil
}

// jsonError words a JSON decoding error.
func jsonError(err error) *apiError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		// Embedded structs' names are no part of the JSON path.
		field := strings.ReplaceAll(strings.ReplaceAll(typeErr.Field, "commonParams.", ""), "penaltyParams.", "")
		return badRequest(field, "invalid_type", "Invalid type for %q: expected %s, got JSON %s", field, typeErr.Type, typeErr.Value)
	}
	return badRequest("", "invalid_json", "The request body is not valid JSON: %v", err)
}

// errMoreJSON is a body holding more than one JSON value.
var errMoreJSON = errors.New("more than one JSON value")

// checkJSONType refuses a body not declared as JSON.
func checkJSONType(ct string) *apiError {
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return &apiError{status: http.StatusUnsupportedMediaType, typ: typeInvalidRequest, code: "unsupported_media_type",
		message: fmt.Sprintf("The request body must be JSON: send \"Content-Type: application/json\" (got %s)", clip(ct))}
}

// clip shortens a client-supplied string for an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:cut], len(s))
}

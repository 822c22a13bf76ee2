package server

// renderMessages turns a /generate request's messages into its input_ids
// with the preset's chat template; a request without messages is left as
// it is.
func (s *Server) renderMessages(nr *NativeRequest) *apiError {
	if nr.Messages == nil {
		return nil
	}
	if nr.Text != nil || nr.InputIDs != nil {
		return badRequest("messages", "invalid_value", "Give text, input_ids or messages, not several")
	}
	msgs, aerr := (&ChatRequest{Messages: nr.Messages}).check()
	if aerr != nil {
		return aerr
	}
	d, aerr := s.deployment(nr.Model)
	if aerr != nil {
		return aerr
	}
	nr.InputIDs, aerr = d.encodeChat(msgs)
	nr.Messages = nil
	return aerr
}

package loader

import (
	"fmt"
	"os"
	"strings"

	"github.com/tokenrouter/tokenrouter/chat"
	"github.com/tokenrouter/tokenrouter/config"
)

// maxTemplateBytes bounds a chat template file.
const maxTemplateBytes = 1 << 20

// checkChatTemplate validates m's ChatTemplate without reading a file.
func checkChatTemplate(m config.Model) error {
	if m.ChatTemplate == "" || config.IsTemplateFile(m.ChatTemplate) {
		return nil
	}
	if _, ok := chat.Builtin(m.ChatTemplate); !ok {
		return fmt.Errorf("chat_template %q: want a template file or one of %s", m.ChatTemplate, strings.Join(chat.BuiltinNames(), ", "))
	}
	return nil
}

// setTemplate sets t's chat template: m's ChatTemplate (a file or a
// built-in name) when given, else shipped (the template the model's files
// carry; "" for none gives the plain layout). A shipped template that does
// not compile gives way to the built-in layout its markers suggest, and
// t.TemplateErr says why; a ChatTemplate file that does not compile is an
// error.
func (t *Text) setTemplate(m config.Model, shipped string) error {
	switch {
	case m.ChatTemplate == "":
		t.Template, t.TemplateErr = chat.FromModel(shipped)
		return nil
	case config.IsTemplateFile(m.ChatTemplate):
		st, err := os.Stat(m.ChatTemplate)
		if err != nil {
			return fmt.Errorf("chat_template: %w", err)
		}
		if st.Size() > maxTemplateBytes {
			return fmt.Errorf("chat_template %s: larger than %d bytes", m.ChatTemplate, maxTemplateBytes)
		}
		b, err := os.ReadFile(m.ChatTemplate)
		if err != nil {
			return fmt.Errorf("chat_template: %w", err)
		}
		if t.Template, err = chat.Parse(string(b)); err != nil {
			return fmt.Errorf("%s: %w", m.ChatTemplate, err)
		}
		return nil
	}
	var ok bool
	if t.Template, ok = chat.Builtin(m.ChatTemplate); !ok {
		return checkChatTemplate(m)
	}
	return nil
}

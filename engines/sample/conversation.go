package sample

import "encoding/json"

// Message is one turn of a conversation.
type Message struct {
	// Role is RoleSystem, RoleUser, RoleAssistant or RoleTool; a Jinja
	// template (NewJinjaTemplate) leaves the judgement of other roles to
	// the template.
	Role string
	// Content is the turn's text.
	Content string
	// ToolCalls are the functions an assistant message calls.
	ToolCalls []ToolCall
	// ToolCallID is, for a RoleTool message, the id of the call it
	// answers.
	ToolCallID string
	// Name is, for a RoleTool message, the function that answered.
	Name string
}

// ToolCall is one function call of an assistant message, in OpenAI's terms.
type ToolCall struct {
	// ID identifies the call ("" : none).
	ID string
	// Name is the function's name.
	Name string
	// Arguments are the call's arguments as JSON text. A template gets
	// them as an object when they are a JSON object, as text otherwise.
	Arguments string
}

// The roles a Message may have.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	// RoleTool is a tool's answer to a ToolCall.
	RoleTool = "tool"
)

// RenderOptions are what Template.Render renders besides the messages.
type RenderOptions struct {
	// AddGenerationPrompt appends the opening of an assistant turn for the
	// model to complete.
	AddGenerationPrompt bool
	// Tools are the tool definitions offered to the model, each a JSON
	// object in OpenAI's shape ({"type": "function", "function": {"name",
	// "description", "parameters"}}); a Jinja template gets them as the
	// list tools, keys in the order given, and the named templates write
	// them in the system message (Render).
	Tools []json.RawMessage
}

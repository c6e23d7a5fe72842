// Package serve is toy serve: a GGUF model over HTTP with OpenAI's API (the server itself is
// engines/serve). Run parses the listening, key, TLS and timeout flags, listens, loads the
// model through cli.ServeFlags (which toy bench serve shares), and shuts down on SIGTERM.
package serve

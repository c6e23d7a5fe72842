package transformer

// What the external tests (package transformer_test, which load the models they write with
// engines/decoding) check of the unexported random-GGUF writer.
var (
	RandomStd = randomStd
	UsePool   = usePool
)

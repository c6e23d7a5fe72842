package runs

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzReadEvents parses arbitrary event logs: never a panic; an error other than a truncated
// last line returns no events; a truncated log returns the events of its intact prefix, which
// parses alone to the same events; a log that parses parses the same again.
func FuzzReadEvents(f *testing.F) {
	f.Add([]byte(startLine + "\n" + stepLine + "\n"))
	f.Add([]byte(startLine + "\n" + stepLine + "\n" + `{"type":"eval","step":1,"loss":2.25}` + "\n" + `{"type":"run_end","step":1,"loss":2.25,"reason":"done"}`))
	f.Add([]byte(oldStartLine + "\n" + stepLine + "\n" + `{"type":"step","step":2,"lo`))
	f.Add([]byte(""))
	f.Add([]byte("\n\n"))
	f.Add([]byte(stepLine + "\n"))
	f.Add([]byte(`{"schema":"toy/v2","type":"run_start"}` + "\n"))
	f.Add([]byte(`{"type":"step","step":1e999,"loss":NaN}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := parseEvents("events.jsonl", data)
		var trunc *TruncatedError
		switch {
		case err == nil:
			again, err2 := parseEvents("events.jsonl", bytes.Clone(data))
			if err2 != nil || !reflect.DeepEqual(events, again) {
				t.Fatalf("a log that parsed does not parse the same again: %v", err2)
			}
		case errors.As(err, &trunc):
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("a TruncatedError that is not ErrTruncated: %v", err)
			}
			if trunc.Offset < 0 || trunc.Offset > int64(len(data)) || !bytes.Equal(data[trunc.Offset:], trunc.Partial) {
				t.Fatalf("truncation at offset %d of %d bytes does not point at the partial line %q", trunc.Offset, len(data), trunc.Partial)
			}
			prefix, err2 := parseEvents("events.jsonl", data[:trunc.Offset])
			if err2 != nil || len(prefix) != len(events) {
				t.Fatalf("the intact prefix gives %d events and %v, the truncated log %d", len(prefix), err2, len(events))
			}
		default:
			if events != nil {
				t.Fatalf("%d events with the error %v", len(events), err)
			}
		}
	})
}

package recipes

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"
)

// progressLine prints a recipe's per-step progress: one redrawn line when interactive, else a
// line every `every` steps and at the last.
type progressLine struct {
	out           io.Writer
	interactive   bool
	every, steps  int
	tokensPerStep int
}

func (p progressLine) printf(format string, args ...any) {
	if p.out != nil {
		fmt.Fprintf(p.out, format, args...)
	}
}

// step reports step (0-based) of a run that started at start at time t0.
func (p progressLine) step(step, start int, loss, lr float64, t0 time.Time) {
	done := step + 1 - start
	elapsed := time.Since(t0)
	eta := time.Duration(float64(elapsed) / float64(done) * float64(p.steps-step-1)).Round(time.Second)
	tps := float64(done*p.tokensPerStep) / elapsed.Seconds()
	if p.interactive {
		const width = 24
		filled := width * (step + 1) / p.steps
		bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
		p.printf("\rstep %*d/%d [%s] loss %.4f lr %.2e %6.0f tok/s ETA %-8s", len(fmt.Sprint(p.steps)), step+1, p.steps, bar, loss, lr, tps, eta)
		return
	}
	if (step+1)%max(p.every, 1) == 0 || step+1 == p.steps {
		p.printf("step %d/%d loss %.4f lr %.2e %.0f tok/s ETA %s\n", step+1, p.steps, loss, lr, tps, eta)
	}
}

// end ends the redrawn line.
func (p progressLine) end() {
	if p.interactive {
		p.printf("\n")
	}
}

// keepOptions copies the options of a recipe's options struct named by their JSON keys from
// src to dst; each must be one of ResumableOptions and a field of T.
func keepOptions[T any](dst, src *T, keys []string) error {
	fields := map[string]int{}
	t := reflect.TypeFor[T]()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		fields[name] = i
	}
	var bad []string
	for _, k := range keys {
		i, ok := fields[k]
		if !ok || !slices.Contains(ResumableOptions, k) {
			bad = append(bad, k)
			continue
		}
		reflect.ValueOf(dst).Elem().Field(i).Set(reflect.ValueOf(src).Elem().Field(i))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s would change the run: a resumed run keeps its own (only %s may change)",
			strings.Join(bad, ", "), strings.Join(ResumableOptions, ", "))
	}
	return nil
}
